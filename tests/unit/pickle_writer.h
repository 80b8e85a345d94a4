// A small pickle writer for unit tests: plain values (None, bool, int, float,
// str, list, tuple, dict with str keys) written with protocol 2's opcodes, as
// PyTorch's C++ writer does, with optional memo puts and gets so that tests can
// share one frame dict or frames list between entries the way real files do.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace memsnap::testing {

struct Py {
  enum class Kind : uint8_t { kNone, kBool, kInt, kFloat, kStr, kList, kTuple, kDict, kGet, kRaw };
  Kind kind = Kind::kNone;
  int64_t integer = 0;
  double number = 0;
  std::string text;       // kStr; kRaw: opcodes written as they are
  std::vector<Py> items;  // kDict: key, value, key, value, ...
  int put = -1;           // BINPUT this memo slot once the value (or empty container) exists

  static Py none() { return {}; }
  static Py boolean(bool value) {
    Py p;
    p.kind = Kind::kBool;
    p.integer = value ? 1 : 0;
    return p;
  }
  static Py num(int64_t value) {
    Py p;
    p.kind = Kind::kInt;
    p.integer = value;
    return p;
  }
  static Py real(double value) {
    Py p;
    p.kind = Kind::kFloat;
    p.number = value;
    return p;
  }
  static Py str(std::string value) {
    Py p;
    p.kind = Kind::kStr;
    p.text = std::move(value);
    return p;
  }
  static Py list(std::vector<Py> items) {
    Py p;
    p.kind = Kind::kList;
    p.items = std::move(items);
    return p;
  }
  static Py tuple(std::vector<Py> items) {
    Py p;
    p.kind = Kind::kTuple;
    p.items = std::move(items);
    return p;
  }
  static Py dict(std::vector<std::pair<std::string, Py>> fields) {
    Py p;
    p.kind = Kind::kDict;
    for (auto& [key, value] : fields) {
      p.items.push_back(str(key));
      p.items.push_back(std::move(value));
    }
    return p;
  }
  // BINGET: the value memoized under `slot` by an earlier put.
  static Py get(int slot) {
    Py p;
    p.kind = Kind::kGet;
    p.integer = slot;
    return p;
  }
  // Opcodes written verbatim (a GLOBAL, say).
  static Py raw(std::string opcodes) {
    Py p;
    p.kind = Kind::kRaw;
    p.text = std::move(opcodes);
    return p;
  }
  Py memo(int slot) && {
    put = slot;
    return std::move(*this);
  }
};

class PickleWriter {
 public:
  // PROTO 2, the value, STOP.
  static std::string write(const Py& root) {
    PickleWriter w;
    w.out_ = std::string("\x80\x02", 2);
    w.value(root);
    w.out_ += '.';
    return w.out_;
  }

 private:
  void put(const Py& p) {
    if (p.put < 0) return;
    out_ += 'r';  // LONG_BINPUT
    u32(static_cast<uint32_t>(p.put));
  }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  void items_of(const Py& p, char end) {
    if (p.items.empty()) return;
    out_ += '(';  // MARK
    for (const Py& item : p.items) value(item);
    out_ += end;
  }
  void value(const Py& p) {
    switch (p.kind) {
      case Py::Kind::kNone: out_ += 'N'; break;
      case Py::Kind::kBool: out_ += p.integer ? '\x88' : '\x89'; break;
      case Py::Kind::kInt:
        if (p.integer >= 0 && p.integer < 256) {
          out_ += 'K';  // BININT1
          out_ += static_cast<char>(p.integer);
        } else if (p.integer >= INT32_MIN && p.integer <= INT32_MAX) {
          out_ += 'J';  // BININT
          u32(static_cast<uint32_t>(static_cast<int32_t>(p.integer)));
        } else {
          out_ += '\x8a';  // LONG1, 8 bytes of two's complement
          out_ += '\x08';
          auto bits = static_cast<uint64_t>(p.integer);
          for (int i = 0; i < 8; ++i) out_ += static_cast<char>((bits >> (8 * i)) & 0xff);
        }
        break;
      case Py::Kind::kFloat: {
        out_ += 'G';  // BINFLOAT, big-endian
        uint64_t bits = 0;
        std::memcpy(&bits, &p.number, sizeof bits);
        for (int i = 7; i >= 0; --i) out_ += static_cast<char>((bits >> (8 * i)) & 0xff);
        break;
      }
      case Py::Kind::kStr:
        out_ += 'X';  // BINUNICODE
        u32(static_cast<uint32_t>(p.text.size()));
        out_ += p.text;
        break;
      case Py::Kind::kList:
        out_ += ']';
        put(p);
        items_of(p, 'e');  // APPENDS
        return;
      case Py::Kind::kTuple:
        out_ += '(';
        for (const Py& item : p.items) value(item);
        out_ += 't';
        break;
      case Py::Kind::kDict:
        out_ += '}';
        put(p);
        items_of(p, 'u');  // SETITEMS
        return;
      case Py::Kind::kGet:
        out_ += 'j';  // LONG_BINGET
        u32(static_cast<uint32_t>(p.integer));
        return;
      case Py::Kind::kRaw: out_ += p.text; break;
    }
    put(p);
  }

  std::string out_;
};

}  // namespace memsnap::testing
