# memsnap_npm_package(NAME OUT_DIR FILES...): the folder of npm package NAME
# at the version package-lock.json pins, for a build without npm.
#
# A developer's checkout has it in node_modules (scripts/setup runs `npm ci`
# from the committed lock file); an sdist carries the files the build uses
# (pyproject.toml). Elsewhere, `pip install .` or `cmake` from a fresh clone,
# configure downloads the tarball npm would install, from the registry
# (MEMSNAP_NPM_REGISTRY, a mirror if you have one), and accepts it only if
# its SHA-512 is the lock file's `integrity`: the same bytes as `npm ci`,
# with no npm. FILES are the paths, inside the package, that must exist.

set(MEMSNAP_NPM_REGISTRY "https://registry.npmjs.org" CACHE STRING
    "npm registry the build downloads locked web assets from when node_modules lacks them")

# The lock file's integrity ("sha512-<base64>") as the hex digest CMake checks.
function(memsnap_base64_to_hex out text)
  set(alphabet "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
  set(digits "0123456789abcdef")
  string(REGEX REPLACE "=+$" "" text "${text}")
  string(LENGTH "${text}" length)
  math(EXPR last "${length} - 1")
  set(bits 0)
  set(bit_count 0)
  set(hex "")
  foreach(index RANGE 0 ${last})
    string(SUBSTRING "${text}" ${index} 1 char)
    string(FIND "${alphabet}" "${char}" value)
    if(value LESS 0)
      message(FATAL_ERROR "memsnap: '${text}' is not base64")
    endif()
    math(EXPR bits "((${bits} << 6) | ${value}) & 0x3FFF")
    math(EXPR bit_count "${bit_count} + 6")
    if(bit_count GREATER_EQUAL 8)
      math(EXPR bit_count "${bit_count} - 8")
      math(EXPR high "(${bits} >> (${bit_count} + 4)) & 15")
      math(EXPR low "(${bits} >> ${bit_count}) & 15")
      string(SUBSTRING "${digits}" ${high} 1 high_digit)
      string(SUBSTRING "${digits}" ${low} 1 low_digit)
      string(APPEND hex "${high_digit}${low_digit}")
    endif()
  endforeach()
  set(${out} "${hex}" PARENT_SCOPE)
endfunction()

function(memsnap_npm_package name out_dir)
  set(installed "${PROJECT_SOURCE_DIR}/node_modules/${name}")
  set(complete TRUE)
  foreach(file IN LISTS ARGN)
    if(NOT EXISTS "${installed}/${file}")
      set(complete FALSE)
    endif()
  endforeach()
  if(complete)
    set(${out_dir} "${installed}" PARENT_SCOPE)
    return()
  endif()

  file(READ "${PROJECT_SOURCE_DIR}/package-lock.json" lock)
  string(JSON version GET "${lock}" packages "node_modules/${name}" version)
  string(JSON integrity GET "${lock}" packages "node_modules/${name}" integrity)
  if(NOT integrity MATCHES "^sha512-(.+)$")
    message(FATAL_ERROR "memsnap: package-lock.json's integrity of ${name} is not SHA-512")
  endif()
  memsnap_base64_to_hex(sha512 "${CMAKE_MATCH_1}")
  set(unpacked "${PROJECT_BINARY_DIR}/_deps/${name}-${version}")
  set(tarball "${unpacked}.tgz")
  if(NOT EXISTS "${unpacked}/package")
    set(url "${MEMSNAP_NPM_REGISTRY}/${name}/-/${name}-${version}.tgz")
    message(STATUS "memsnap: ${name} ${version} is not in node_modules; downloading ${url}")
    file(DOWNLOAD "${url}" "${tarball}" STATUS status TLS_VERIFY ON)
    list(GET status 0 code)
    if(code EQUAL 0)
      file(SHA512 "${tarball}" actual)
    endif()
    if(NOT code EQUAL 0 OR NOT actual STREQUAL sha512)
      file(REMOVE "${tarball}")
      list(GET status 1 reason)
      if(code EQUAL 0)
        set(reason "its SHA-512 is not package-lock.json's")
      endif()
      message(FATAL_ERROR
        "memsnap: the page of `memsnap plot` needs ${name} ${version} (npm), and neither "
        "node_modules has it nor could it be downloaded from ${url}: ${reason}.\n"
        "Run scripts/setup (it runs `npm ci`), set MEMSNAP_NPM_REGISTRY to a mirror, or build "
        "without the page: -DMEMSNAP_HTML_PLOT=OFF (pip: -Ccmake.define.MEMSNAP_HTML_PLOT=OFF).")
    endif()
    file(ARCHIVE_EXTRACT INPUT "${tarball}" DESTINATION "${unpacked}")
    file(REMOVE "${tarball}")
  endif()
  foreach(file IN LISTS ARGN)
    if(NOT EXISTS "${unpacked}/package/${file}")
      message(FATAL_ERROR "memsnap: ${name} ${version}'s tarball has no ${file}")
    endif()
  endforeach()
  set(${out_dir} "${unpacked}/package" PARENT_SCOPE)
endfunction()
