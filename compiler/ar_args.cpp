#include "compiler/ar_args.h"

#include "compiler/reason_code.h"

namespace ccpool::compiler {
namespace {

ArArgs refuse(std::string code, std::string why) {
  ArArgs a;
  a.refused_code = std::move(code);
  a.refused = std::move(why);
  return a;
}

// An operand the tool takes as a path and nothing else.
bool plain_operand(const std::string& arg) {
  return !arg.empty() && arg[0] != '-' && arg[0] != '@';
}

}  // namespace

ArArgs parse_ar_args(const std::vector<std::string>& argv) {
  if (argv.size() < 3) return refuse("ar_operation", "ar without an archive operand");
  std::string_view key = argv[1];
  if (key.substr(0, 2) == "--" || key.empty() || key[0] == '@')
    return refuse(reason_code("ar_option", key), "ar option " + argv[1] + " is not cacheable");
  if (key[0] == '-') key.remove_prefix(1);
  int ops = 0;
  bool quiet = false;
  for (char c : key) {
    switch (c) {
      case 'q':
      case 'r':
        ++ops;
        break;
      case 'c':  // no warning when the archive is created
        quiet = true;
        break;
      case 's':  // an index (GNU ar writes one anyway)
      case 'S':  // no index
      case 'D':  // zero dates and ids (GNU's default)
      case 'v':  // "a - MEMBER" per member, as written (GNU make's ARFLAGS is rv)
        break;
      case 'd':
      case 'm':
      case 'p':
      case 't':
      case 'x':
        return refuse(reason_code("ar_operation", std::string(1, c)),
                      std::string("ar ") + c + " does not make an archive");
      default:
        // a, b, i, N take a member name or a count; u compares dates; U
        // stamps the clock; T makes a thin archive of paths; P, f, l, o, O,
        // V change names, dependencies or what is printed.
        return refuse(reason_code("ar_modifier", std::string(1, c)),
                      std::string("ar modifier ") + c + " is not cacheable");
    }
  }
  if (ops != 1)
    return refuse("ar_operation", "ar " + argv[1] + " is not one of q and r with modifiers");
  for (size_t i = 2; i < argv.size(); ++i) {
    if (!plain_operand(argv[i]))
      return refuse(reason_code("ar_option", argv[i]),
                    "ar operand '" + argv[i] + "' is an option or an @file");
    if (i > 2 && argv[i] == argv[2])
      return refuse("ar_archive_is_member", "ar archive '" + argv[2] + "' is also a member");
  }
  ArArgs a;
  a.archive_index = 2;
  a.create_quietly = quiet;
  return a;
}

ArArgs parse_ranlib_args(const std::vector<std::string>& argv) {
  size_t i = 1;
  if (argv.size() == 3 && argv[1] == "-D") i = 2;
  if (argv.size() != i + 1 || !plain_operand(argv[i]))
    return refuse("ranlib_arguments", "ranlib other than `ranlib [-D] ARCHIVE`");
  ArArgs a;
  a.archive_index = i;
  return a;
}

std::string archive_not_deterministic(std::string_view bytes) {
  constexpr std::string_view kMagic = "!<arch>\n";
  constexpr size_t kHeader = 60;
  if (bytes.substr(0, kMagic.size()) != kMagic) return "not a regular ar archive (thin or other)";
  // A numeric header field: decimal digits padded with spaces; "0" wanted.
  auto field = [](std::string_view f) {
    size_t end = f.find_last_not_of(' ');
    return end == std::string_view::npos ? std::string_view() : f.substr(0, end + 1);
  };
  size_t at = kMagic.size();
  while (at < bytes.size()) {
    if (bytes.size() - at < kHeader) return "a member header is cut short";
    std::string_view h = bytes.substr(at, kHeader);
    if (h.substr(58, 2) != "`\n") return "a member header is malformed";
    std::string_view name = field(h.substr(0, 16));
    std::string_view date = field(h.substr(16, 12)), uid = field(h.substr(28, 6)),
                     gid = field(h.substr(34, 6)), mode = field(h.substr(40, 8));
    // The long-name table ("//") has no date, ids or mode; the symbol table
    // ("/", "/SYM64/") mode 0; members 644, whatever their files' modes.
    bool ok = name == "//"
                  ? date.empty() && uid.empty() && gid.empty() && mode.empty()
                  : date == "0" && uid == "0" && gid == "0" && (mode == "0" || mode == "644");
    if (!ok) {
      return "member '" + std::string(name) +
             "' carries a date, ids or a mode (not GNU ar's deterministic mode)";
    }
    std::string_view size_text = field(h.substr(48, 10));
    if (size_text.empty()) return "a member header has no size";
    size_t size = 0;
    for (char c : size_text) {
      if (c < '0' || c > '9') return "a member size is malformed";
      size = size * 10 + static_cast<size_t>(c - '0');  // at most 10 digits: no overflow
      if (size > bytes.size()) return "a member runs past the end of the archive";
    }
    at += kHeader;
    if (size > bytes.size() - at) return "a member runs past the end of the archive";
    at += size + (size & 1);  // members are padded to an even offset
  }
  return "";
}

}  // namespace ccpool::compiler
