/* A shared library that allocates for its caller and frees what the caller allocated. */
#include <stdlib.h>
#include <string.h>

char *side_strdup(const char *s) {
    char *d = malloc(strlen(s) + 1);
    if (d) strcpy(d, s);
    return d;
}

void *side_grow(void *p, size_t n) { return realloc(p, n); }

void side_free(void *p) { free(p); }
