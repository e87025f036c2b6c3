/* Blocks cross the boundary between a program and a shared library (and libc itself),
 * both ways. */
#include "check.h"

#include <stdint.h>
#include <unistd.h>

char *side_strdup(const char *s);
void *side_grow(void *p, size_t n);
void side_free(void *p);

static void library_and_program(void) {
    for (int i = 0; i < 10000; i++) {
        char *a = side_strdup("from the library"); /* library allocates, program frees */
        CHECK(strcmp(a, "from the library") == 0);
        free(a);
        char *b = malloc(32 + (size_t)i % 5000); /* program allocates, library frees */
        strcpy(b, "from the program");
        b = side_grow(b, 10000 + (size_t)i);
        CHECK(strcmp(b, "from the program") == 0);
        side_free(b);
    }
}

static void libc_internal_allocations(void) {
    /* Blocks libc allocates internally and the program frees, and the reverse. */
    char *s = NULL;
    CHECK(asprintf(&s, "%d %s", 42, "asprintf") > 0);
    free(s);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    for (int i = 0; i < 10000; i++) fprintf(m, "line %d\n", i);
    fclose(m);
    CHECK(len > 50000);
    FILE *f = fmemopen(buf, len, "r");
    char *line = NULL;
    size_t cap = 0;
    int lines = 0;
    while (getline(&line, &cap, f) > 0) lines++;
    CHECK(lines == 10000);
    free(line);
    fclose(f);
    free(buf);
    char *cwd = getcwd(NULL, 0);
    CHECK(cwd != NULL);
    free(cwd);
    char *real = realpath(".", NULL);
    CHECK(real != NULL);
    free(real);
}

int main(int argc, char **argv) {
    static const struct named_case cases[] = {
        {"library_and_program", library_and_program},
        {"libc_internal_allocations", libc_internal_allocations},
        {NULL, NULL},
    };
    return run_named(argc, argv, cases);
}
