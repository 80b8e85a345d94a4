#include "analysis/core/source_key.h"

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <sstream>

#include "analysis/core/categories.h"
#include "memsnap/error.h"

namespace memsnap {
namespace {

// The reference rule's internal frames, exactly as its scripts list them.
constexpr std::array kReferenceInternalPathParts = {
    std::string_view("/torch/"),
    std::string_view("/torch_"),
    std::string_view("torch/nn/modules/module.py"),
    std::string_view("torch/autograd/"),
    std::string_view("torch/amp/"),
    std::string_view("torch/cuda/"),
    std::string_view("torch/distributed/"),
    std::string_view("/cuda/"),
    std::string_view("/hydra/"),
    std::string_view("/python3."),
    std::string_view("/importlib/"),
    std::string_view("/runpy.py"),
};
constexpr std::array kReferenceInternalNames = {
    std::string_view("<module>"),   std::string_view("<lambda>"),
    std::string_view("_call_impl"), std::string_view("_wrapped_call_impl"),
    std::string_view("inner"),
};

// Packages whose frames are never the answer, matched as a folder (or file)
// of the path under any installer: thin helpers that hand the tensor on to a
// PyTorch op, so the line that called them names the allocation, and
// wrappers PyTorch or its backends put around the user's call. Every other
// third-party package (transformers, torchvision, bitsandbytes, ...) stays
// the user's code: a model defined there is named there. Found on real
// snapshots (the evidence column); docs/semantics.md lists this table.
constexpr std::array kHelperPackages = {
    HelperPackage{"einops/",
                  "rearrange, reduce and einsum pass the tensor to a torch op "
                  "(einsum@_backends.py:291 headed the CS336 files' tables)"},
    HelperPackage{"opt_einsum/", "plans a contraction order and calls torch.einsum or tensordot"},
    HelperPackage{"einx/", "einops-style notation compiled to torch ops"},
    HelperPackage{"torch_npu/", "PyTorch's Ascend backend: patches Module.to and storage"},
    HelperPackage{"accelerate/hooks.py",
                  "the forward wrapper accelerate installs on dispatched modules (new_forward)"},
};

// v2's library code, matched in a path whose separators are all '/'.
// PyTorch (with _dynamo, _inductor, fx), Triton, torch.compile's generated
// code, the interpreter's frozen modules and the reference's other paths.
constexpr std::array kLibraryPathParts = {
    std::string_view("/torch/"),        std::string_view("/triton/"),
    std::string_view("torchinductor_"),  // the inductor cache: generated kernels and wrappers
    std::string_view("<eval_with_key"),  // FX GraphModule code
    std::string_view("<frozen "),       std::string_view("/hydra/"),  std::string_view("/cuda/"),
    std::string_view("importlib"),      std::string_view("runpy.py"),
};
// Where pip, conda and the distributions put third-party code: never the
// standard library, whatever folder holds it.
constexpr std::array kThirdPartyParts = {
    std::string_view("site-packages/"),
    std::string_view("dist-packages/"),
};
// The standard library's own modules and packages (CPython's
// sys.stdlib_module_names that are Python files, 3.8 to 3.14, lower case): a
// file directly in an interpreter's lib folder, or a package folder there, is
// the standard library when its name is one of these. Sorted, for binary
// search.
using namespace std::string_view_literals;
constexpr std::array kStandardLibraryModules = {
    "__future__"sv,
    "_aix_support"sv,
    "_android_support"sv,
    "_apple_support"sv,
    "_bootlocale"sv,
    "_bootsubprocess"sv,
    "_collections_abc"sv,
    "_colorize"sv,
    "_compat_pickle"sv,
    "_compression"sv,
    "_dummy_thread"sv,
    "_ios_support"sv,
    "_markupbase"sv,
    "_opcode_metadata"sv,
    "_osx_support"sv,
    "_py_abc"sv,
    "_pydecimal"sv,
    "_pyio"sv,
    "_pyrepl"sv,
    "_sitebuiltins"sv,
    "_strptime"sv,
    "_threading_local"sv,
    "_weakrefset"sv,
    "abc"sv,
    "aifc"sv,
    "annotationlib"sv,
    "antigravity"sv,
    "argparse"sv,
    "ast"sv,
    "asynchat"sv,
    "asyncio"sv,
    "asyncore"sv,
    "base64"sv,
    "bdb"sv,
    "binhex"sv,
    "bisect"sv,
    "bz2"sv,
    "calendar"sv,
    "cgi"sv,
    "cgitb"sv,
    "chunk"sv,
    "cmd"sv,
    "code"sv,
    "codecs"sv,
    "codeop"sv,
    "collections"sv,
    "colorsys"sv,
    "compileall"sv,
    "compression"sv,
    "concurrent"sv,
    "configparser"sv,
    "contextlib"sv,
    "contextvars"sv,
    "copy"sv,
    "copyreg"sv,
    "cprofile"sv,
    "crypt"sv,
    "csv"sv,
    "ctypes"sv,
    "curses"sv,
    "dataclasses"sv,
    "datetime"sv,
    "dbm"sv,
    "decimal"sv,
    "difflib"sv,
    "dis"sv,
    "distutils"sv,
    "doctest"sv,
    "dummy_threading"sv,
    "email"sv,
    "encodings"sv,
    "ensurepip"sv,
    "enum"sv,
    "filecmp"sv,
    "fileinput"sv,
    "fnmatch"sv,
    "formatter"sv,
    "fractions"sv,
    "ftplib"sv,
    "functools"sv,
    "genericpath"sv,
    "getopt"sv,
    "getpass"sv,
    "gettext"sv,
    "glob"sv,
    "graphlib"sv,
    "gzip"sv,
    "hashlib"sv,
    "heapq"sv,
    "hmac"sv,
    "html"sv,
    "http"sv,
    "idlelib"sv,
    "imaplib"sv,
    "imghdr"sv,
    "imp"sv,
    "importlib"sv,
    "inspect"sv,
    "io"sv,
    "ipaddress"sv,
    "json"sv,
    "keyword"sv,
    "lib2to3"sv,
    "linecache"sv,
    "locale"sv,
    "logging"sv,
    "lzma"sv,
    "macpath"sv,
    "mailbox"sv,
    "mailcap"sv,
    "mimetypes"sv,
    "modulefinder"sv,
    "multiprocessing"sv,
    "netrc"sv,
    "nntplib"sv,
    "ntpath"sv,
    "nturl2path"sv,
    "numbers"sv,
    "opcode"sv,
    "operator"sv,
    "optparse"sv,
    "os"sv,
    "pathlib"sv,
    "pdb"sv,
    "pickle"sv,
    "pickletools"sv,
    "pipes"sv,
    "pkgutil"sv,
    "platform"sv,
    "plistlib"sv,
    "poplib"sv,
    "posixpath"sv,
    "pprint"sv,
    "profile"sv,
    "pstats"sv,
    "pty"sv,
    "py_compile"sv,
    "pyclbr"sv,
    "pydoc"sv,
    "pydoc_data"sv,
    "queue"sv,
    "quopri"sv,
    "random"sv,
    "re"sv,
    "reprlib"sv,
    "rlcompleter"sv,
    "runpy"sv,
    "sched"sv,
    "secrets"sv,
    "selectors"sv,
    "shelve"sv,
    "shlex"sv,
    "shutil"sv,
    "signal"sv,
    "site"sv,
    "smtpd"sv,
    "smtplib"sv,
    "sndhdr"sv,
    "socket"sv,
    "socketserver"sv,
    "sqlite3"sv,
    "sre_compile"sv,
    "sre_constants"sv,
    "sre_parse"sv,
    "ssl"sv,
    "stat"sv,
    "statistics"sv,
    "string"sv,
    "stringprep"sv,
    "struct"sv,
    "subprocess"sv,
    "sunau"sv,
    "symbol"sv,
    "symtable"sv,
    "sysconfig"sv,
    "tabnanny"sv,
    "tarfile"sv,
    "telnetlib"sv,
    "tempfile"sv,
    "textwrap"sv,
    "this"sv,
    "threading"sv,
    "timeit"sv,
    "tkinter"sv,
    "token"sv,
    "tokenize"sv,
    "tomllib"sv,
    "trace"sv,
    "traceback"sv,
    "tracemalloc"sv,
    "tty"sv,
    "turtle"sv,
    "turtledemo"sv,
    "types"sv,
    "typing"sv,
    "unittest"sv,
    "urllib"sv,
    "uu"sv,
    "uuid"sv,
    "venv"sv,
    "warnings"sv,
    "wave"sv,
    "weakref"sv,
    "webbrowser"sv,
    "wsgiref"sv,
    "xdrlib"sv,
    "xml"sv,
    "xmlrpc"sv,
    "zipapp"sv,
    "zipfile"sv,
    "zipimport"sv,
    "zoneinfo"sv,
};

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// C++ frames that only say how the stack was captured or how the allocator
// works; they never explain who allocated.
constexpr std::array kMachineryParts = {
    std::string_view("unwind"),
    std::string_view("CapturedTraceback"),
    std::string_view("gather_with_cpp"),
    std::string_view("CachingAllocator"),
    std::string_view("at::_ops"),
    std::string_view("c10::impl"),
    std::string_view("_PyEval_"),
    std::string_view("PyObject_"),
    std::string_view("_PyObject_"),
    std::string_view("PyEval_"),
    std::string_view("_PyFunction_"),
    std::string_view("PyVectorcall"),
    std::string_view("_start"),
    std::string_view("__libc_start"),
    // The C library's and libstdc++'s thread start: every thread's outermost frames.
    std::string_view("clone3"),
    std::string_view("__clone"),
    std::string_view("start_thread"),
    std::string_view("execute_native_thread_routine"),
    std::string_view("c10::cuda::"),
    std::string_view("c10::Dispatcher"),
    std::string_view("c10::BoxedKernel"),
    std::string_view("c10::KernelFunction"),
    std::string_view("torch::autograd::THPVariable_"),
    std::string_view("cfunction_"),
    std::string_view("method_vectorcall"),
    std::string_view("_Py"),
    std::string_view("at::detail::"),
    std::string_view("at::empty"),
    std::string_view("at::native::empty"),
    std::string_view("create_out("),
    std::string_view("set_output_raw_strided"),
    std::string_view("TensorIteratorBase::"),
    std::string_view("torch::autograd::Engine::"),
    std::string_view("torch::autograd::Node::"),
    std::string_view("thread_init"),
    std::string_view("execute_native_thread_routine"),
    std::string_view("pthread_"),
    std::string_view("clone"),
};

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// The reference's basename (os.path.basename on POSIX: '/' only).
std::string_view posix_basename(std::string_view path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// Either separator, for files recorded on Windows.
std::string_view any_basename(std::string_view path) {
  size_t slash = path.find_last_of("/\\");
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// How a key names a Python frame's file: its basename, except for the
// temporary files a notebook runs its cells from, named as the cells they
// are: ipykernel's `/tmp/ipykernel_123/2415349784.py` (a hash of the cell)
// is "notebook cell 2415349784", IPython's older
// `<ipython-input-5-6fc7b0a1>` is "notebook cell In[5]".
std::string display_file(std::string_view filename) {
  const std::string_view base = any_basename(filename);
  const auto all_digits = [](std::string_view text) {
    return !text.empty() &&
           std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (filename.find("ipykernel_") != std::string_view::npos && base.ends_with(".py") &&
      all_digits(base.substr(0, base.size() - 3))) {
    return fmt::format("notebook cell {}", base.substr(0, base.size() - 3));
  }
  constexpr std::string_view kIpythonInput = "<ipython-input-";
  if (base.starts_with(kIpythonInput)) {
    std::string_view rest = base.substr(kIpythonInput.size());
    rest = rest.substr(0, rest.find('-'));
    if (all_digits(rest)) return fmt::format("notebook cell In[{}]", rest);
  }
  return std::string(base);
}

// Separators as '/', so one spelling matches paths recorded on any system.
std::string normalized_path(std::string_view filename) {
  std::string path(filename);
  std::replace(path.begin(), path.end(), '\\', '/');
  return path;
}

std::string lower_case(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) {
    return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  });
  return lower;
}

// python3, python3.11, python3.13t, python2.7: the folder the interpreter
// keeps its standard library in under lib/.
bool is_python_version_folder(std::string_view folder) {
  if (!folder.starts_with("python")) return false;
  folder.remove_prefix(6);
  if (folder.ends_with('t')) folder.remove_suffix(1);
  if (folder.empty() || folder.front() < '2' || folder.front() > '3') return false;
  folder.remove_prefix(1);
  if (folder.empty()) return true;
  if (folder.front() != '.' || folder.size() == 1) return false;
  folder.remove_prefix(1);
  return std::all_of(folder.begin(), folder.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

bool is_reference_internal_frame(std::string_view name, std::string_view filename) {
  for (std::string_view part : kReferenceInternalPathParts) {
    if (contains(filename, part)) return true;
  }
  for (std::string_view internal : kReferenceInternalNames) {
    if (name == internal) return true;
  }
  return false;
}

std::span<const HelperPackage> helper_packages() {
  return kHelperPackages;
}

bool is_helper_package_file(std::string_view filename) {
  std::string path(1, '/');
  path += normalized_path(filename);
  return std::any_of(kHelperPackages.begin(), kHelperPackages.end(),
                     [&path](const HelperPackage& helper) {
                       // A helper's folder starts at a path separator ("/einops/").
                       for (size_t at = path.find(helper.path_part); at != std::string::npos;
                            at = path.find(helper.path_part, at + 1)) {
                         if (at > 0 && path[at - 1] == '/') return true;
                       }
                       return false;
                     });
}

bool is_standard_library_file(std::string_view filename) {
  const std::string path = normalized_path(filename);
  if (std::any_of(kThirdPartyParts.begin(), kThirdPartyParts.end(),
                  [&path](std::string_view part) { return contains(path, part); })) {
    return false;
  }
  std::vector<std::string_view> parts;
  for (size_t start = 0; start <= path.size();) {
    size_t end = std::min(path.find('/', start), path.size());
    parts.push_back(std::string_view(path).substr(start, end - start));
    start = end + 1;
  }
  // The interpreter's lib folder: lib, Lib or lib64 in any case, whoever
  // installed it (the distribution, pyenv, conda, uv, the python.org
  // installer).
  for (size_t i = 0; i + 2 <= parts.size(); ++i) {
    const std::string folder = lower_case(parts[i]);
    if (folder != "lib" && folder != "lib64") continue;
    const std::string next = lower_case(parts[i + 1]);
    const bool last = i + 2 == parts.size();
    // POSIX layouts: <prefix>/lib/python3.X/ (python3.13t for free-threaded
    // builds), every file under it.
    if (!last && is_python_version_folder(next)) return true;
    // Windows layouts: <prefix>\Lib\copy.py, <prefix>\Lib\json\decoder.py.
    std::string_view module = next;
    if (last) {
      if (!module.ends_with(".py")) continue;
      module.remove_suffix(3);
    }
    if (std::binary_search(kStandardLibraryModules.begin(), kStandardLibraryModules.end(),
                           module)) {
      return true;
    }
  }
  return false;
}

bool is_library_file(std::string_view filename) {
  const std::string path = normalized_path(filename);
  if (path.starts_with("torch/") || path.starts_with("triton/")) return true;
  for (std::string_view part : kLibraryPathParts) {
    if (contains(path, part)) return true;
  }
  return is_helper_package_file(path) || is_standard_library_file(path);
}

bool is_under_root(std::string_view filename, std::string_view root) {
  std::string path = normalized_path(filename);
  std::string folder = normalized_path(root);
  while (folder.starts_with("./")) folder.erase(0, 2);
  while (folder.size() > 1 && folder.back() == '/') folder.pop_back();
  if (folder.empty() || folder == ".") return false;
  // Windows paths are the same in any case.
  const auto windows = [](std::string_view text) { return text.size() >= 2 && text[1] == ':'; };
  if (windows(path) || windows(folder) || filename.find('\\') != std::string_view::npos) {
    path = lower_case(path);
    folder = lower_case(folder);
  }
  if (folder == "/") return path.starts_with('/');
  const bool absolute = folder.front() == '/' || windows(folder);
  if (path.starts_with(folder + "/")) return true;
  // A relative folder (the repository's name, or a path inside it) matches
  // wherever the recording machine kept it.
  return !absolute && contains(path, "/" + folder + "/");
}

std::string_view autograd_node_name(std::string_view frame_name) {
  if (contains(frame_name, "AccumulateGrad")) return "AccumulateGrad";
  // Each occurrence's word begins where the run of letters and digits
  // before it does; a run that reaches back to the previous occurrence
  // begins where that one's did, so no character is scanned twice (a name
  // of "xBackward" repeated was quadratic).
  const auto in_word = [&](size_t i) {
    return is_identifier_char(frame_name[i]) && frame_name[i] != '_';
  };
  size_t previous_at = 0;
  size_t previous_begin = 0;
  bool previous = false;
  for (size_t at = frame_name.find("Backward"); at != std::string_view::npos;
       at = frame_name.find("Backward", at + 1)) {
    const size_t stop = previous ? previous_at : 0;
    size_t begin = at;
    while (begin > stop && in_word(begin - 1)) --begin;
    if (previous && begin == stop) begin = previous_begin;
    previous = true;
    previous_at = at;
    previous_begin = begin;
    size_t end = at + std::string_view("Backward").size();
    if (end < frame_name.size() && frame_name[end] == 's') ++end;  // CopyBackwards
    while (end < frame_name.size() && frame_name[end] >= '0' && frame_name[end] <= '9') ++end;
    const bool ends_identifier =
        end == frame_name.size() || !is_identifier_char(frame_name[end]) || frame_name[end] == '_';
    if (begin < at && frame_name[begin] >= 'A' && frame_name[begin] <= 'Z' && ends_identifier) {
      return frame_name.substr(begin, end - begin);
    }
  }
  return {};
}

std::string trim_cpp_signature(std::string_view name) {
  constexpr std::string_view kAnonymous = "(anonymous namespace)";
  std::string out;
  int angle = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (c == '(' && name.substr(i).starts_with(kAnonymous)) {
      if (angle == 0) out += kAnonymous;
      i += kAnonymous.size() - 1;
      continue;
    }
    if (c == '(' && angle == 0) break;  // the argument list
    if (c == '<') {
      ++angle;
    } else if (c == '>' && angle > 0) {
      --angle;
    } else if (angle == 0) {
      out.push_back(c);
    }
  }
  // The return type is what precedes the last space outside parentheses.
  int paren = 0;
  size_t cut = std::string::npos;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == '(') ++paren;
    if (out[i] == ')') --paren;
    if (out[i] == ' ' && paren == 0) cut = i;
  }
  if (cut != std::string::npos) out.erase(0, cut + 1);
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out.empty() ? std::string(name) : out;
}

bool is_cpp_frame(std::string_view filename, int64_t line) {
  if (filename.empty() || filename == "??") return true;
  if (ends_with(filename, ".py")) return false;
  if (filename.front() == '<') return false;  // <string>, <frozen runpy>, <eval_with_key>
  // C, C++, CUDA and assembly sources (glibc's clone3.S, libstdc++'s
  // thread.cc), headers, and shared objects, versioned ones too (libc.so.6).
  for (std::string_view suffix :
       {".cpp", ".cc", ".cxx", ".c++", ".c", ".h", ".hh", ".hpp", ".hxx", ".inl", ".ipp", ".tcc",
        ".cu", ".cuh", ".S", ".s", ".asm", ".so"}) {
    if (ends_with(filename, suffix)) return true;
  }
  if (const size_t so = filename.rfind(".so."); so != std::string_view::npos) {
    const std::string_view version = filename.substr(so + 4);
    if (!version.empty() && version.find_first_not_of("0123456789.") == std::string_view::npos) {
      return true;
    }
  }
  return line == 0;
}

bool is_capture_machinery(std::string_view name) {
  for (std::string_view part : kMachineryParts) {
    if (name.find(part) != std::string_view::npos) return true;
  }
  return false;
}

bool group_picks_frames(GroupBy group) {
  return group == GroupBy::kFile || group == GroupBy::kFunction || group == GroupBy::kStack;
}

std::optional<GroupBy> parse_group_by(std::string_view name) {
  // GroupBy's values run from kSource to kPool; group_label names each.
  for (int i = 0; i <= static_cast<int>(GroupBy::kPool); ++i) {
    const auto group = static_cast<GroupBy>(i);
    if (group_label(group) == name) return group;
  }
  return std::nullopt;
}

std::string_view group_label(GroupBy group) {
  switch (group) {
    case GroupBy::kSource: return "source";
    case GroupBy::kFile: return "file";
    case GroupBy::kFunction: return "function";
    case GroupBy::kStack: return "stack";
    case GroupBy::kCategory: return "category";
    case GroupBy::kUserMetadata: return "user_metadata";
    case GroupBy::kCompileContext: return "compile_context";
    case GroupBy::kAnnotation: return "annotation";
    case GroupBy::kPool: return "pool";
  }
  return "source";
}

std::vector<CategoryRuleSpec> parse_category_rules(std::string_view text, std::string_view file) {
  std::vector<CategoryRuleSpec> rules;
  int number = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string line(text.substr(start, end - start));
    start = end + 1;
    ++number;
    if (size_t hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream fields(line);
    CategoryRuleSpec rule;
    std::string where;
    if (!(fields >> rule.category)) continue;  // blank or comment
    std::getline(fields >> where >> std::ws, rule.pattern);
    while (!rule.pattern.empty() && (rule.pattern.back() == ' ' || rule.pattern.back() == '\r')) {
      rule.pattern.pop_back();
    }
    const auto fail = [&](const std::string& why) {
      return Error(
          ErrorCode::kBadConfigFile,
          fmt::format("{}:{}: {} (a rule is: CATEGORY frame|cpp|annotation|metadata REGEX)", file,
                      number, why));
    };
    if (!parse_category(rule.category))
      throw fail(fmt::format("'{}' is no category", rule.category));
    rule.category = std::string(category_name(*parse_category(rule.category)));
    if (where == "frame") {
      rule.where = CategoryRuleSpec::Where::kFrame;
    } else if (where == "cpp") {
      rule.where = CategoryRuleSpec::Where::kCpp;
    } else if (where == "annotation") {
      rule.where = CategoryRuleSpec::Where::kAnnotation;
    } else if (where == "metadata") {
      rule.where = CategoryRuleSpec::Where::kMetadata;
    } else {
      throw fail(fmt::format("'{}' is not frame, cpp, annotation or metadata", where));
    }
    if (rule.pattern.empty()) throw fail("no regex");
    // Compiled once here to refuse what is no regex, naming the line.
    try {
      [[maybe_unused]] const Pattern checked(rule.pattern, fmt::format("{}:{}:", file, number));
    } catch (const Error& error) {
      throw Error(ErrorCode::kBadConfigFile, error.message());
    }
    rule.line = number;
    rules.push_back(std::move(rule));
  }
  if (rules.size() > 64)
    throw Error(ErrorCode::kBadConfigFile, fmt::format("{}: more than 64 rules", file));
  return rules;
}

namespace {

// One traceback line at `at` (which starts with 'File "'):
// 'File "/home/u/model.py", line 42, in forward'. Read by hand, in one pass:
// the trace is the snapshot's text, of any length.
struct TraceEntry {
  std::string_view file;
  std::string_view line;
  std::string_view function;
  size_t end = 0;
};

std::optional<TraceEntry> trace_entry_at(std::string_view text, size_t at) {
  constexpr std::string_view kFile = "File \"";
  constexpr std::string_view kLine = "\", line ";
  constexpr std::string_view kIn = ", in ";
  TraceEntry entry;
  size_t pos = at + kFile.size();
  const size_t file_end = text.find_first_of("\"\n", pos);
  if (file_end == std::string_view::npos || file_end == pos || text[file_end] != '"') {
    return std::nullopt;
  }
  entry.file = text.substr(pos, file_end - pos);
  pos = file_end;
  if (text.substr(pos, kLine.size()) != kLine) return std::nullopt;
  pos += kLine.size();
  const size_t digits = pos;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') ++pos;
  if (pos == digits) return std::nullopt;
  entry.line = text.substr(digits, pos - digits);
  if (text.substr(pos, kIn.size()) != kIn) return std::nullopt;
  pos += kIn.size();
  const size_t name = pos;
  const auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  };
  while (pos < text.size() && !space(text[pos])) ++pos;
  if (pos == name) return std::nullopt;
  entry.function = text.substr(name, pos - name);
  entry.end = pos;
  return entry;
}

}  // namespace

std::string fx_origin(std::string_view original_trace) {
  // Python's traceback lines: '  File "/home/u/model.py", line 42, in forward';
  // the last one outside the libraries is the model's line.
  std::string origin;
  size_t pos = 0;
  while ((pos = original_trace.find("File \"", pos)) != std::string_view::npos) {
    const std::optional<TraceEntry> entry = trace_entry_at(original_trace, pos);
    if (!entry) {
      ++pos;
      continue;
    }
    pos = entry->end;
    if (is_library_file(entry->file)) continue;
    origin = fmt::format("{}@{}:{}", entry->function, any_basename(entry->file), entry->line);
  }
  return origin;
}

namespace {

void check_grouping(const SourceKeyOptions& options, const KeyOptionNames& names) {
  if (options.rule == KeyRule::kReference && group_picks_frames(options.group)) {
    throw Error(ErrorCode::kBadParameter,
                fmt::format("{} other than source needs memsnap's keys ({})", names.group_by,
                            names.user_keys));
  }
}

std::vector<Pattern> compiled_patterns(const std::vector<std::string>& patterns,
                                       std::string_view name) {
  std::vector<Pattern> compiled;
  compiled.reserve(patterns.size());
  for (const std::string& pattern : patterns) compiled.emplace_back(pattern, name);
  return compiled;
}

}  // namespace

SourceKeys::SourceKeys(const Snapshot& snapshot, const SourceKeyOptions& options)
    : snapshot_(snapshot),
      options_(options),
      cache_(snapshot.stacks.size() + 1),
      computed_(snapshot.stacks.size() + 1, false) {
  options_.depth = std::max(options_.depth, 1);
  const KeyOptionNames names;
  check_grouping(options_, names);
  skip_ = compiled_patterns(options_.skip, names.skip);
  keep_ = compiled_patterns(options_.keep, names.keep);
}

void check_key_options(const SourceKeyOptions& options, const KeyOptionNames& names) {
  check_grouping(options, names);
  compiled_patterns(options.skip, names.skip);
  compiled_patterns(options.keep, names.keep);
}

const std::string& SourceKeys::key(StackId stack) {
  if (stack.value >= snapshot_.stacks.size() + 1)
    throw Error(ErrorCode::kInternalError, "stack id out of range of this snapshot");
  if (stack.value >= cache_.size()) {
    cache_.resize(stack.value + 1);
    computed_.resize(stack.value + 1, false);
  }
  if (!computed_[stack.value]) {
    cache_[stack.value] =
        options_.rule == KeyRule::kReference ? compute_reference(stack) : compute(stack);
    computed_[stack.value] = true;
  }
  return cache_[stack.value];
}

SourceKeys::FrameClass SourceKeys::classify(FrameId id) {
  if (id.value >= frame_class_.size()) frame_class_.resize(id.value + 1, kUnknown);
  FrameClass& known = frame_class_[id.value];
  if (known != kUnknown) return known;
  const Frame& frame = snapshot_.frames.get(id);
  std::string_view name = snapshot_.strings.get(frame.name);
  std::string_view filename = snapshot_.strings.get(frame.filename);
  if (is_cpp_frame(filename, frame.line)) {
    known = is_capture_machinery(name) ? kMachinery : kCpp;
    return known;
  }
  known = is_library_file(filename) ? kLibrary : kUser;
  if (frame.fx_original_trace.value != 0) {
    // torch.compile's generated frame, augmented with the model line it came
    // from: that line is the user's code.
    std::string origin = fx_origin(snapshot_.strings.get(frame.fx_original_trace));
    if (!origin.empty()) {
      fx_origins_.emplace(id.value, std::move(origin));
      known = kUser;
      return known;
    }
  }
  if (!skip_.empty() || !keep_.empty()) {
    std::string subject = fmt::format("{}@{}:{}", name, filename, frame.line);
    const auto matches = [&subject](const std::vector<Pattern>& patterns) {
      return std::any_of(patterns.begin(), patterns.end(),
                         [&subject](const Pattern& pattern) { return pattern.search(subject); });
    };
    if (matches(keep_)) {
      known = kUser;
      return known;  // the user's word, wherever the file is
    }
    if (matches(skip_)) known = kLibrary;
  }
  if (known == kUser && !options_.roots.empty()) {
    const bool under_root =
        std::any_of(options_.roots.begin(), options_.roots.end(),
                    [filename](const std::string& root) { return is_under_root(filename, root); });
    // Third-party code in a virtual environment inside the repository is no
    // line of the user's own.
    const bool third_party =
        contains(filename, "site-packages") || contains(filename, "dist-packages");
    if (!under_root || third_party) known = kOutsideRoot;
  }
  return known;
}

std::string SourceKeys::render(FrameId id) const {
  const Frame& frame = snapshot_.frames.get(id);
  std::string_view name = snapshot_.strings.get(frame.name);
  std::string_view filename = snapshot_.strings.get(frame.filename);
  if (is_cpp_frame(filename, frame.line)) {
    return fmt::format("{}@{}:{}", trim_cpp_signature(name), any_basename(filename), frame.line);
  }
  if (auto origin = fx_origins_.find(id.value); origin != fx_origins_.end()) return origin->second;
  return fmt::format("{}@{}:{}", name, display_file(filename), frame.line);
}

std::string SourceKeys::freeing_code(StackId stack) {
  std::string user_key = key(stack);
  if (options_.rule != KeyRule::kUserCode || options_.group != GroupBy::kSource) return user_key;
  // The innermost Python frame, when it is library code and a user's frame
  // lies below it (the key names that one).
  std::optional<FrameId> library_frame;
  for (FrameId id : snapshot_.stacks.get(stack)) {
    const FrameClass frame_class = classify(id);
    if (frame_class == kCpp || frame_class == kMachinery) continue;
    if (frame_class == kLibrary) {
      if (!library_frame) library_frame = id;
      continue;
    }
    if (!library_frame) break;  // the user's own line freed it
    return fmt::format("{} -> {}", render(*library_frame), user_key);
  }
  return user_key;
}

// v2: the user's frames (under --root, when given; then the user's others);
// else the autograd node; else Python library frames; else C++ frames that
// are no machinery; else nothing usable.
std::string SourceKeys::compute(StackId stack) {
  std::span<const FrameId> frames = snapshot_.stacks.get(stack);
  std::vector<FrameId> user;
  std::vector<FrameId> outside_root;
  std::vector<FrameId> library;
  std::vector<FrameId> cpp;
  std::string_view node;
  for (FrameId id : frames) {
    switch (classify(id)) {
      case kUser: user.push_back(id); break;
      case kOutsideRoot: outside_root.push_back(id); break;
      case kLibrary: library.push_back(id); break;
      case kCpp:
        if (node.empty())
          node = autograd_node_name(snapshot_.strings.get(snapshot_.frames.get(id).name));
        cpp.push_back(id);
        break;
      default: break;
    }
  }
  if (user.empty() && outside_root.empty() && !node.empty()) {
    return fmt::format("{} (backward)", node);
  }
  const std::vector<FrameId>& chosen = !user.empty()           ? user
                                       : !outside_root.empty() ? outside_root
                                       : !library.empty()      ? library
                                                               : cpp;
  if (chosen.empty()) return std::string(kNoFrames);
  return group(chosen);
}

std::string SourceKeys::group(std::span<const FrameId> chosen) const {
  const Frame& first = snapshot_.frames.get(chosen.front());
  std::string_view filename = snapshot_.strings.get(first.filename);
  switch (options_.group) {
    case GroupBy::kFile: {
      // The file FX provenance names, for a compiled frame.
      if (auto origin = fx_origins_.find(chosen.front().value); origin != fx_origins_.end()) {
        std::string_view line = origin->second;
        line = line.substr(line.find('@') + 1);
        return std::string(line.substr(0, line.rfind(':')));
      }
      return display_file(filename);
    }
    case GroupBy::kFunction: {
      std::string key = render(chosen.front());
      return key.substr(0, key.rfind(':'));  // name@file, without the line
    }
    case GroupBy::kSource:
    case GroupBy::kStack:
    case GroupBy::kCategory:
    case GroupBy::kUserMetadata:
    case GroupBy::kCompileContext:
    case GroupBy::kAnnotation:
    case GroupBy::kPool: break;  // SourceIndex's, by event
  }
  size_t take = options_.group == GroupBy::kStack
                    ? chosen.size()
                    : std::min<size_t>(chosen.size(), static_cast<size_t>(options_.depth));
  std::string key;
  for (size_t i = 0; i < take; ++i) {
    if (i != 0) key += " -> ";
    key += render(chosen[i]);
  }
  return key;
}

// The reference scripts' rule, exactly: skip internal frames, keep the first
// `depth` left, else the first `depth` frames; raw names, POSIX basenames.
std::string SourceKeys::compute_reference(StackId stack) const {
  std::span<const FrameId> frames = snapshot_.stacks.get(stack);
  if (frames.empty()) return std::string(kNoFrames);
  std::vector<FrameId> kept;
  for (FrameId id : frames) {
    const Frame& frame = snapshot_.frames.get(id);
    if (!is_reference_internal_frame(snapshot_.strings.get(frame.name),
                                     snapshot_.strings.get(frame.filename))) {
      kept.push_back(id);
    }
  }
  std::span<const FrameId> chosen = kept.empty() ? frames : std::span<const FrameId>(kept);
  std::string key;
  size_t take = std::min<size_t>(chosen.size(), static_cast<size_t>(options_.depth));
  for (size_t i = 0; i < take; ++i) {
    const Frame& frame = snapshot_.frames.get(chosen[i]);
    if (i != 0) key += " -> ";
    key += fmt::format("{}@{}:{}", snapshot_.strings.get(frame.name),
                       posix_basename(snapshot_.strings.get(frame.filename)), frame.line);
  }
  return key;
}

}  // namespace memsnap
