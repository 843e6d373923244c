// Writes the seed corpora under fuzz/corpus/<target>/ from the real encoders,
// so every seed is a value ccpool itself writes (plus a few hand-made edge
// cases). Not part of the build; rerun after a format change:
//   clang++ -std=c++20 -I. fuzz/make_seeds.cpp cache/record.cpp cache/codec.cpp \
//     remote/envelope.cpp remote/hmac.cpp compiler/manifest.cpp base/hash.cpp base/error.cpp \
//     -lzstd -lxxhash -lcrypto -o /tmp/make_seeds && /tmp/make_seeds fuzz/corpus
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cache/bytes.h"
#include "cache/codec.h"
#include "cache/record.h"
#include "compiler/manifest.h"
#include "remote/envelope.h"

using namespace ccpool;

namespace {

std::string g_root;

void seed(const std::string& target, const std::string& name, const std::string& bytes) {
  std::string dir = g_root + "/" + target;
  ::mkdir(dir.c_str(), 0755);
  std::FILE* f = std::fopen((dir + "/" + name).c_str(), "wb");
  if (!f) return;
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

struct Sample {
  std::string record;
  std::vector<std::pair<Digest, std::string>> bodies;  // digest -> stored body
  std::string packed;
};

Sample sample(cache::Codec& codec, int exit_code, const std::string& object,
              const std::string& err) {
  cache::Record rec;
  rec.kind = cache::EntryKind::kCompile;
  rec.created_ms = 1700000000000;
  rec.time_saved_ms = 1234;
  rec.exit_code = exit_code;
  rec.tool = "/usr/bin/g++";
  rec.cwd = "/home/u/build";
  rec.argv = {"g++", "-c", "k.cpp", "-o", "k.o"};
  rec.inputs = {"k.cpp", "/usr/include/stdio.h"};
  Sample s;
  auto add = [&](const std::string& data) {
    cache::BodyRef ref{data.size(), hash_bytes(data)};
    if (!data.empty()) s.bodies.emplace_back(ref.digest, codec.encode(data));
    return ref;
  };
  rec.outputs.push_back({"k.o", 0644, add(object)});
  rec.stderr_body = add(err);
  s.record = cache::encode_record(rec);
  std::vector<cache::PackedBody> packed;
  for (const auto& [d, stored] : s.bodies) packed.push_back({d, stored});
  s.packed = cache::pack_entry(s.record, packed);
  return s;
}

std::string archive(const std::vector<std::pair<Digest, std::string>>& entries) {
  cache::ByteWriter w;
  w.bytes("CCPOOLAR");
  w.u32(1);
  w.u32(1);
  for (const auto& [key, packed] : entries) {
    w.u8(0x01);
    w.digest(key);
    w.u64(packed.size());
    w.bytes(packed);
  }
  w.u8(0xFF);
  w.u64(entries.size());
  Digest sum = hash_bytes(w.out());
  w.digest(sum);
  return std::move(w.out());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  g_root = argv[1];
  cache::Codec codec(1);
  std::string object(3000, '\0');
  for (size_t i = 0; i < object.size(); ++i) object[i] = static_cast<char>((i * 7) ^ (i >> 3));
  Sample ok = sample(codec, 0, object, "");
  Sample warn = sample(codec, 0, std::string(20000, 'z'), "k.cpp:1: warning: unused\n");
  Sample failed = sample(codec, 1, "", "k.cpp:2: error: expected ';'\n");

  seed("store_record_fuzz", "record-ok", ok.record);
  seed("store_record_fuzz", "record-failed", failed.record);
  seed("store_record_fuzz", "packed-ok", ok.packed);
  seed("store_record_fuzz", "packed-warn", warn.packed);
  seed("store_record_fuzz", "usage",
       std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x00\x00\x00\x00\x00\x00\x00", 16));

  seed("codec_fuzz", "zstd", std::string(1, '\x14') + codec.encode(std::string(20000, 'z')));
  seed("codec_fuzz", "raw", std::string(1, '\x0c') + codec.encode(object.substr(0, 40)));
  std::string lying = codec.encode(std::string(5000, 'q'));
  uint64_t huge = uint64_t{1} << 40;
  std::memcpy(lying.data() + 1, &huge, 8);
  seed("codec_fuzz", "lying-size", std::string(1, '\x17') + lying);

  seed("archive_fuzz", "one-entry", archive({{hash_bytes("k1"), ok.packed}}));
  seed("archive_fuzz", "three-entries",
       archive({{hash_bytes("k1"), ok.packed},
                {hash_bytes("k2"), warn.packed},
                {hash_bytes("k3"), failed.packed}}));
  seed("archive_fuzz", "empty", archive({}));

  Digest key = hash_bytes("fuzz-entry");
  seed("remote_envelope_fuzz", "unsigned", remote::seal(key, ok.packed, ""));
  seed("remote_envelope_fuzz", "signed",
       remote::seal(key, failed.packed, "fuzz-hmac-key-0123456789abcdef"));
  seed("remote_envelope_fuzz", "empty-value", remote::seal(key, "", ""));

  compiler::Manifest m;
  compiler::ManifestEntry e;
  e.result_key = hash_bytes("result");
  e.files = {{"k.cpp", hash_bytes("src")},
             {"/usr/include/stdio.h", hash_bytes("hdr")},
             {"odd name\n:x.h", hash_bytes("o")}};
  e.negatives = {"k.h", "/home/u/build/include/stdio.h"};
  e.absent = {"prefix.h.gch"};
  e.dirs = {{"pch/prefix.h.gch", hash_bytes("names")}};
  m.entries.push_back(e);
  e.date_bucket = 1888888;
  e.negatives.clear();
  m.entries.push_back(e);
  seed("manifest_fuzz", "two-entries", compiler::serialize_manifest(m));
  seed("manifest_fuzz", "empty", compiler::serialize_manifest({}));

  seed("cc_args_fuzz", "compile", "-c\nk.cpp\n-o\nk.o\n-O2\n-I\ninclude\n-MD\n-MF\nk.d");
  seed("cc_args_fuzz", "response", "@r\n-o\nk.so\n%%\n-c 'k 1.cpp' -DX=\"a b\" \\\n -Iinc");
  seed("cc_args_fuzz", "recursive", "@r\n%%\n-c k.c @r");
  seed("nvcc_fuzz", "compile",
       "-c\nk.cu\n-o\nk.o\n-Iinc\n-gencode\narch=compute_90,code=sm_90\n-Xcompiler\n-fPIC,-O2\n%%\n"
       "#$ PATH=/cuda/bin:/usr/bin\n#$ CICC_PATH=/cuda/nvvm/bin\n"
       "#$ gcc -D__CUDA_ARCH__=900 -E -x c++ -I\"inc\" -D \"FOO=a b\" \"k.cu\" -o \"/tmp/t.ii\" \n"
       "#$ \"$CICC_PATH/cicc\" --orig_src_path_name \"/w/k.cu\" -o \"/tmp/t.ptx\"\n");
  seed("nvcc_fuzz", "refused", "-c\n-rdc=true\nk.cu\n%%\n#$ gcc -E k.cu > out\n#$ x $UNSET\n");
  seed("cc_args_fuzz", "link",
       "k.cpp\n-shared\n-fPIC\n-o\nk.so\n-lm\n-Wl,-rpath,/opt/lib\n-march=native");

  seed("cc_probe_fuzz", "gcc-E-v",
       "Using built-in specs.\nignoring nonexistent directory "
       "\"/usr/local/include/x86_64-linux-gnu\"\n"
       "#include \"...\" search starts here:\n /home/u/q\n#include <...> search starts here:\n"
       " /usr/lib/gcc/x86_64-linux-gnu/12/include\n /usr/local/include\n "
       "/usr/include/x86_64-linux-gnu\n"
       " /usr/include\n /System/Library/Frameworks (framework directory)\nEnd of search list.\n");
  seed("cc_probe_fuzz", "gcc-###",
       "Target: x86_64-linux-gnu\n \"/usr/lib/gcc/x86_64-linux-gnu/12/cc1\" \"-quiet\" \"k.c\"\n"
       " \"/usr/lib/gcc/x86_64-linux-gnu/12/collect2\" \"-plugin\" "
       "\"/usr/lib/gcc/liblto_plugin.so\" "
       "\"-o\" \"k.so\" \"-L/usr/lib\" \"-lm\" \"-lc\" \"a\\\"b\"\n");
  return 0;
}
