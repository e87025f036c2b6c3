/* A library with a large thread-local array: loaded with dlopen, its TLS is dynamic, and
 * glibc allocates each thread's copy with malloc inside __tls_get_addr. */
__thread char big[100000];
__thread int counter;

char *touch(int i) {
    big[i % (int)sizeof big] = (char)i;
    counter += i;
    return big;
}
