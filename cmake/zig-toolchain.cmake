# A CMake toolchain file for Zig's C and C++ compilers (clang with its own
# libc++ and the headers and stubs of an old glibc), for a program or a Python
# extension that runs on old Linux systems: built for glibc 2.17 by default,
# with the C++ runtime (libc++) linked in, it needs no libstdc++ and no newer
# glibc than the target's.
#
#   cmake -DCMAKE_TOOLCHAIN_FILE=cmake/zig-toolchain.cmake -DMEMSNAP_DEPS_PREFIX=PREFIX ...
#
# Cache variables (each also read from the environment variable of its name):
#   MEMSNAP_ZIG          the command that runs zig: "zig", or "/venv/bin/python -m ziglang"
#                        (the ziglang package of PyPI); default: zig on PATH, else
#                        python3 -m ziglang
#   MEMSNAP_ZIG_TARGET   zig's target triple, default x86_64-linux-gnu.2.17
#   MEMSNAP_DEPS_PREFIX  where the C++ libraries were installed, built with this
#                        same toolchain (scripts/dist_deps). Libraries, headers,
#                        CMake packages and pkg-config files are looked for there
#                        only, never in /usr: the host's headers are glibc's of
#                        the build machine, and its libraries need libstdc++.
#
# The compilers are four wrapper scripts written at configure time into
# <build>/zig-toolchain/ (zig-clang, zig-clang++, zig-ar, zig-ranlib): CMake
# needs one executable per tool, and zig's is one program with subcommands.
# The names say clang so that ccache, which guesses a compiler's kind from its
# name, treats them as clang (CMAKE_CXX_COMPILER_LAUNCHER=ccache works); each
# names zig's version in a comment, so a new zig is a new compiler to ccache.
#
# Programs (Python, pkg-config, git) are still the host's. The Python
# extension's headers are the host Python's: FindPython and nanobind are let
# through below (see "Python").

# This file is read again by every try_compile; these variables go with it.
get_property(_memsnap_in_try_compile GLOBAL PROPERTY IN_TRY_COMPILE)
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES
     MEMSNAP_ZIG MEMSNAP_ZIG_TARGET MEMSNAP_DEPS_PREFIX MEMSNAP_ZIG_WRAPPERS)

# memsnap_zig_setting(VAR DEFAULT DOC): VAR from the cache, else from the
# environment, else DEFAULT; cached.
macro(memsnap_zig_setting var default doc)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    if(DEFINED ENV{${var}} AND NOT "$ENV{${var}}" STREQUAL "")
      set(${var} "$ENV{${var}}" CACHE STRING "${doc}" FORCE)
    else()
      set(${var} "${default}" CACHE STRING "${doc}" FORCE)
    endif()
  endif()
endmacro()

if(NOT DEFINED MEMSNAP_ZIG AND NOT DEFINED ENV{MEMSNAP_ZIG})
  find_program(_memsnap_zig_on_path zig NO_CACHE)
  if(_memsnap_zig_on_path)
    set(_memsnap_zig_default "${_memsnap_zig_on_path}")
  else()
    set(_memsnap_zig_default "python3 -m ziglang")
  endif()
endif()
memsnap_zig_setting(MEMSNAP_ZIG "${_memsnap_zig_default}" "The command that runs zig")
memsnap_zig_setting(MEMSNAP_ZIG_TARGET "x86_64-linux-gnu.2.17" "Zig's target triple")
memsnap_zig_setting(MEMSNAP_DEPS_PREFIX "" "The prefix of the libraries built with this toolchain")
if(MEMSNAP_DEPS_PREFIX STREQUAL "")
  message(FATAL_ERROR "zig-toolchain.cmake: set MEMSNAP_DEPS_PREFIX to the prefix scripts/dist_deps "
                      "installed the libraries into")
endif()
# A relative prefix is the caller's working folder's; cached absolute, as
# try_compile (in a folder of its own) receives it.
if(NOT _memsnap_in_try_compile AND NOT IS_ABSOLUTE "${MEMSNAP_DEPS_PREFIX}")
  if(DEFINED ENV{PWD})
    set(_base "$ENV{PWD}")
  else()
    set(_base "${CMAKE_BINARY_DIR}")
  endif()
  get_filename_component(_prefix "${MEMSNAP_DEPS_PREFIX}" ABSOLUTE BASE_DIR "${_base}")
  set(MEMSNAP_DEPS_PREFIX "${_prefix}" CACHE STRING "The prefix of the libraries built with this toolchain" FORCE)
endif()

# Another processor than the build machine's: a cross build (no try_run).
string(REGEX MATCH "^[^-]+" _memsnap_zig_arch "${MEMSNAP_ZIG_TARGET}")
if(CMAKE_HOST_SYSTEM_PROCESSOR AND NOT _memsnap_zig_arch STREQUAL CMAKE_HOST_SYSTEM_PROCESSOR)
  set(CMAKE_SYSTEM_NAME Linux)
  set(CMAKE_SYSTEM_PROCESSOR ${_memsnap_zig_arch})
endif()

# ---- the wrappers -------------------------------------------------------------
# Written once per build folder (try_compile reuses the parent's), and only
# when their text changes, so that their time stamp (ccache's check of the
# compiler) stays put from one configure to the next.
if(NOT _memsnap_in_try_compile)
  set(MEMSNAP_ZIG_WRAPPERS "${CMAKE_BINARY_DIR}/zig-toolchain" CACHE INTERNAL "")
  separate_arguments(_memsnap_zig_command UNIX_COMMAND "${MEMSNAP_ZIG}")
  execute_process(COMMAND ${_memsnap_zig_command} version
                  OUTPUT_VARIABLE _memsnap_zig_version OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE _memsnap_zig_result)
  if(NOT _memsnap_zig_result EQUAL 0)
    message(FATAL_ERROR "zig-toolchain.cmake: `${MEMSNAP_ZIG} version` failed (${_memsnap_zig_result}); "
                        "set MEMSNAP_ZIG to the command that runs zig")
  endif()
  # The command, each word quoted for sh.
  set(_memsnap_zig_sh "")
  foreach(_word IN LISTS _memsnap_zig_command)
    string(REPLACE "'" "'\\''" _word "${_word}")
    string(APPEND _memsnap_zig_sh "'${_word}' ")
  endforeach()
  foreach(_tool IN ITEMS clang clang++ ar ranlib)
    if(_tool STREQUAL "clang")
      set(_args "cc -target ${MEMSNAP_ZIG_TARGET}")
    elseif(_tool STREQUAL "clang++")
      set(_args "c++ -target ${MEMSNAP_ZIG_TARGET}")
    else()
      set(_args "${_tool}")
    endif()
    set(_file "${MEMSNAP_ZIG_WRAPPERS}/zig-${_tool}")
    file(WRITE "${_file}.new"
         "#!/bin/sh\n"
         "# Written by cmake/zig-toolchain.cmake: zig ${_memsnap_zig_version}, ${MEMSNAP_ZIG_TARGET}\n"
         "exec ${_memsnap_zig_sh}${_args} \"$@\"\n")
    file(COPY_FILE "${_file}.new" "${_file}" ONLY_IF_DIFFERENT)
    file(REMOVE "${_file}.new")
    file(CHMOD "${_file}" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE
                                      GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
  endforeach()
endif()

set(CMAKE_C_COMPILER "${MEMSNAP_ZIG_WRAPPERS}/zig-clang")
set(CMAKE_CXX_COMPILER "${MEMSNAP_ZIG_WRAPPERS}/zig-clang++")
set(CMAKE_ASM_COMPILER "${MEMSNAP_ZIG_WRAPPERS}/zig-clang")
set(CMAKE_AR "${MEMSNAP_ZIG_WRAPPERS}/zig-ar" CACHE FILEPATH "Archiver (zig ar)" FORCE)
set(CMAKE_RANLIB "${MEMSNAP_ZIG_WRAPPERS}/zig-ranlib" CACHE FILEPATH "Ranlib (zig ranlib)" FORCE)
# What CMake uses for archives of IPO (LTO) objects.
set(CMAKE_C_COMPILER_AR "${CMAKE_AR}" CACHE FILEPATH "" FORCE)
set(CMAKE_CXX_COMPILER_AR "${CMAKE_AR}" CACHE FILEPATH "" FORCE)
set(CMAKE_C_COMPILER_RANLIB "${CMAKE_RANLIB}" CACHE FILEPATH "" FORCE)
set(CMAKE_CXX_COMPILER_RANLIB "${CMAKE_RANLIB}" CACHE FILEPATH "" FORCE)

# ---- where libraries are found ------------------------------------------------
# The deps prefix is the only root: a search path /x is looked for as
# PREFIX/x, and PREFIX itself as PREFIX/.
set(CMAKE_FIND_ROOT_PATH "${MEMSNAP_DEPS_PREFIX}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
list(APPEND CMAKE_PREFIX_PATH "${MEMSNAP_DEPS_PREFIX}")
# Debian's multiarch folder (PREFIX/lib/x86_64-linux-gnu) is searched too: the
# system's Boost package that scripts/dist_deps links in lies there, since it
# finds its headers three folders up (PREFIX/include). CMake learns it from
# the compiler's own library folders, which zig's are not.
if(NOT CMAKE_LIBRARY_ARCHITECTURE AND MEMSNAP_ZIG_TARGET MATCHES "^([^-]+)-linux-gnu")
  set(CMAKE_LIBRARY_ARCHITECTURE "${CMAKE_MATCH_1}-linux-gnu")
endif()

# pkg-config reads the prefix's .pc files only (PKG_CONFIG_PATH would add to
# them, and the system's default folders are replaced by PKG_CONFIG_LIBDIR).
set(ENV{PKG_CONFIG_LIBDIR} "${MEMSNAP_DEPS_PREFIX}/lib/pkgconfig:${MEMSNAP_DEPS_PREFIX}/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")

# ---- Python -------------------------------------------------------------------
# The extension builds against the host Python's headers and nanobind's CMake
# package, neither under the deps prefix. A variable a caller sets wins
# (scikit-build-core sets Python_EXECUTABLE and Python_INCLUDE_DIR); else the
# interpreter is python3 on PATH, and its include folder and nanobind's
# package folder are given to FindPython and find_package as their answers,
# which no root path restricts. nanobind's folder is looked for in the
# caller's CMAKE_PREFIX_PATH (scikit-build-core's build environment), else
# asked of the interpreter.
if(NOT _memsnap_in_try_compile)
  if(NOT DEFINED Python_EXECUTABLE AND NOT DEFINED Python3_EXECUTABLE)
    find_program(_memsnap_python3 python3 NO_CACHE)
    if(_memsnap_python3)
      set(Python_EXECUTABLE "${_memsnap_python3}" CACHE FILEPATH "Python (zig-toolchain.cmake: python3 on PATH)")
    endif()
  endif()
  foreach(_prefix IN ITEMS Python Python3)
    if(DEFINED ${_prefix}_EXECUTABLE AND NOT DEFINED ${_prefix}_INCLUDE_DIR)
      execute_process(COMMAND "${${_prefix}_EXECUTABLE}" -c
                              "import sysconfig; print(sysconfig.get_paths()['include'])"
                      OUTPUT_VARIABLE _include OUTPUT_STRIP_TRAILING_WHITESPACE
                      RESULT_VARIABLE _result ERROR_QUIET)
      if(_result EQUAL 0 AND EXISTS "${_include}/Python.h")
        set(${_prefix}_INCLUDE_DIR "${_include}" CACHE PATH "Python's headers (zig-toolchain.cmake)")
      endif()
    endif()
  endforeach()
  if(NOT nanobind_DIR)
    foreach(_path IN LISTS CMAKE_PREFIX_PATH)
      if(EXISTS "${_path}/nanobind/cmake/nanobind-config.cmake")
        set(nanobind_DIR "${_path}/nanobind/cmake" CACHE PATH "nanobind's CMake package (zig-toolchain.cmake)")
        break()
      endif()
    endforeach()
  endif()
  if(NOT nanobind_DIR AND (DEFINED Python_EXECUTABLE OR DEFINED Python3_EXECUTABLE))
    if(DEFINED Python_EXECUTABLE)
      set(_python "${Python_EXECUTABLE}")
    else()
      set(_python "${Python3_EXECUTABLE}")
    endif()
    execute_process(COMMAND "${_python}" -m nanobind --cmake_dir
                    OUTPUT_VARIABLE _cmake_dir OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE _result ERROR_QUIET)
    if(_result EQUAL 0 AND EXISTS "${_cmake_dir}/nanobind-config.cmake")
      set(nanobind_DIR "${_cmake_dir}" CACHE PATH "nanobind's CMake package (zig-toolchain.cmake)")
    endif()
  endif()
endif()
