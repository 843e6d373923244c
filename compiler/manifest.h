// Direct-mode manifests: for one direct key, the results seen so far and the
// input files each one depends on. Stored by the service as a blob under the
// direct key. Text layout, version line first (paths are length-prefixed so
// any byte is allowed in them):
//   ccpool-manifest v3\n
//   entry <result-hex> <date-bucket or -1> <n-files> <n-negatives> <n-absent> <n-dirs> <n-checks>\n
//   f <digest-hex> <len>:<path>\n      (n-files times)     a regular file with this content
//   n <len>:<path>\n                   (n-negatives times) must not be a regular file
//   a <len>:<path>\n                   (n-absent times)    must not exist at all (a PCH candidate)
//   d <digest-hex> <len>:<path>\n      (n-dirs times)      a directory whose entry names hash to
//   this c <kind> <len>:<path> <len>:<answer>\n (n-checks times) a lookup and its answer
//   (compiler/observed.h)
// Paths are as the compiler wrote them (relative ones resolve against the
// requester's cwd, which is only shared when cwd cannot reach the output).
// v1 and v2 manifests (made from a model of what the compiler reads, not
// from a record of it) do not parse, so their entries are never trusted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/hash.h"

namespace ccpool::compiler {

// One recorded lookup other than a file's content or an absent path: kind
// 't' stat type, 'l' lstat type, 'a' access(2), 'r' readlink, 'k' realpath,
// 'o' a failed open's errno, 'm' size and mtime, 'e' an environment
// variable, 'g' getcwd, 'p' whether $PWD names the cwd.
struct ManifestCheck {
  char kind = 0;
  std::string path;    // as the tool wrote it (relative: against the cwd); a name for 'e'
  std::string answer;  // as compiler/observed.cpp forms it
  bool operator==(const ManifestCheck&) const = default;
};

struct ManifestEntry {
  Digest result_key;
  int64_t date_bucket = -1;  // >= 0: the result embeds __DATE__; valid only in this bucket
  std::vector<std::pair<std::string, Digest>> files;
  std::vector<std::string> negatives;  // must not exist as regular files
  std::vector<std::string> absent;     // must not exist at all (NAME.gch / NAME.pch candidates)
  std::vector<std::pair<std::string, Digest>>
      dirs;  // directory -> digest of its sorted entry names
  std::vector<ManifestCheck> checks;
};

struct Manifest {
  std::vector<ManifestEntry> entries;  // newest first
};

constexpr size_t kMaxManifestEntries = 16;
constexpr size_t kMaxManifestFiles = 10000;       // per entry
constexpr size_t kMaxManifestNegatives = 100000;  // per entry, negatives and absent paths together
constexpr size_t kMaxManifestDirs = 1000;         // per entry
constexpr size_t kMaxManifestChecks = 100000;     // per entry

std::string serialize_manifest(const Manifest& manifest);
// nullopt on any malformation (the caller treats it as empty: a miss).
std::optional<Manifest> parse_manifest(const std::string& text);

// 15-minute UTC buckets: every real time zone offset is a multiple of 15
// minutes, so one bucket never straddles a local date change.
int64_t date_bucket(int64_t unix_seconds);

}  // namespace ccpool::compiler
