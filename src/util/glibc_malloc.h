// MEMSNAP_GLIBC_MALLOC is defined (and <malloc.h> included) when glibc's own
// malloc is in use, not a sanitizer's, which replaces it and leaves glibc's
// arenas unset: malloc_trim and mallopt would crash there.
#pragma once

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define MEMSNAP_SANITIZED_MALLOC 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define MEMSNAP_SANITIZED_MALLOC 1
#endif
#if defined(__GLIBC__) && !defined(MEMSNAP_SANITIZED_MALLOC)
#define MEMSNAP_GLIBC_MALLOC 1
#include <malloc.h>
#endif
