#include "pickle/opcodes.h"

namespace memsnap::pickle {
namespace {

struct NamedOpcode {
  uint8_t byte;
  std::string_view name;
};

constexpr NamedOpcode kOpcodeNames[] = {
    {kMark, "MARK"},
    {kStop, "STOP"},
    {kPop, "POP"},
    {kPopMark, "POP_MARK"},
    {kDup, "DUP"},
    {kFloat, "FLOAT"},
    {kInt, "INT"},
    {kBinInt, "BININT"},
    {kBinInt1, "BININT1"},
    {kLong, "LONG"},
    {kBinInt2, "BININT2"},
    {kNone, "NONE"},
    {kPersId, "PERSID"},
    {kBinPersId, "BINPERSID"},
    {kReduce, "REDUCE"},
    {kString, "STRING"},
    {kBinString, "BINSTRING"},
    {kShortBinString, "SHORT_BINSTRING"},
    {kUnicode, "UNICODE"},
    {kBinUnicode, "BINUNICODE"},
    {kAppend, "APPEND"},
    {kBuild, "BUILD"},
    {kGlobal, "GLOBAL"},
    {kDict, "DICT"},
    {kEmptyDict, "EMPTY_DICT"},
    {kAppends, "APPENDS"},
    {kGet, "GET"},
    {kBinGet, "BINGET"},
    {kInst, "INST"},
    {kLongBinGet, "LONG_BINGET"},
    {kList, "LIST"},
    {kEmptyList, "EMPTY_LIST"},
    {kObj, "OBJ"},
    {kPut, "PUT"},
    {kBinPut, "BINPUT"},
    {kLongBinPut, "LONG_BINPUT"},
    {kSetItem, "SETITEM"},
    {kTuple, "TUPLE"},
    {kEmptyTuple, "EMPTY_TUPLE"},
    {kSetItems, "SETITEMS"},
    {kBinFloat, "BINFLOAT"},
    {kProto, "PROTO"},
    {kNewObj, "NEWOBJ"},
    {kExt1, "EXT1"},
    {kExt2, "EXT2"},
    {kExt4, "EXT4"},
    {kTuple1, "TUPLE1"},
    {kTuple2, "TUPLE2"},
    {kTuple3, "TUPLE3"},
    {kNewTrue, "NEWTRUE"},
    {kNewFalse, "NEWFALSE"},
    {kLong1, "LONG1"},
    {kLong4, "LONG4"},
    {kBinBytes, "BINBYTES"},
    {kShortBinBytes, "SHORT_BINBYTES"},
    {kShortBinUnicode, "SHORT_BINUNICODE"},
    {kBinUnicode8, "BINUNICODE8"},
    {kBinBytes8, "BINBYTES8"},
    {kEmptySet, "EMPTY_SET"},
    {kAddItems, "ADDITEMS"},
    {kFrozenSet, "FROZENSET"},
    {kNewObjEx, "NEWOBJ_EX"},
    {kStackGlobal, "STACK_GLOBAL"},
    {kMemoize, "MEMOIZE"},
    {kFrame, "FRAME"},
    {kByteArray8, "BYTEARRAY8"},
    {kNextBuffer, "NEXT_BUFFER"},
    {kReadOnlyBuffer, "READONLY_BUFFER"},
};

}  // namespace

std::string_view opcode_name(uint8_t byte) {
  for (const NamedOpcode& opcode : kOpcodeNames) {
    if (opcode.byte == byte) return opcode.name;
  }
  return "";
}

}  // namespace memsnap::pickle
