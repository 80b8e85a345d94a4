#include "pickle/value.h"

namespace memsnap::pickle {

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "None";
    case Kind::kBool: return "bool";
    case Kind::kInt:
    case Kind::kUInt:
    case Kind::kBigInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kStr: return "str";
    case Kind::kBytes: return "bytes";
    case Kind::kByteArray: return "bytearray";
    case Kind::kObject: return "object";
    case Kind::kList: return "list";
    case Kind::kTuple: return "tuple";
    case Kind::kDict: return "dict";
    case Kind::kSet: return "set";
    case Kind::kFrozenSet: return "frozenset";
    case Kind::kExternal:
    case Kind::kExternalRange: return "decoded value";
  }
  return "?";
}

std::string kind_with_article(Kind kind) {
  std::string name = kind_name(kind);
  if (kind == Kind::kNone) return name;  // "None", as Python says it
  bool vowel = !name.empty() && std::string("aeiou").find(name.front()) != std::string::npos;
  return (vowel ? "an " : "a ") + name;
}

}  // namespace memsnap::pickle
