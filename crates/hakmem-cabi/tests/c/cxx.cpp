// C++ operator new/delete through hakmem: the workload case prints the same with or
// without hakmem; the other cases check hakmem-only behaviour and print "ok".
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            std::exit(1);                                                            \
        }                                                                            \
    } while (0)

static bool aligned(const void *p, std::size_t a) { return (reinterpret_cast<std::uintptr_t>(p) & (a - 1)) == 0; }

struct Base {
    virtual ~Base() = default;
    virtual std::size_t value() const = 0;
};
template <std::size_t N> struct Derived : Base {
    char payload[N];
    explicit Derived(char c) { std::memset(payload, c, N); }
    std::size_t value() const override { return N + static_cast<unsigned char>(payload[N - 1]); }
};
struct alignas(64) Line { char c[100]; };
struct alignas(4096) Page { char c[10]; };
struct alignas(256) Huge { char c[300000]; };

// Containers, strings, polymorphic objects (sized delete of the dynamic type),
// over-aligned objects, threads. Deterministic output.
static void workload() {
    std::map<std::string, std::vector<int>> m;
    for (int i = 0; i < 50000; i++) m["key" + std::to_string(i % 3000)].push_back(i);
    std::size_t total = 0;
    for (auto &kv : m) total += kv.first.size() + kv.second.size();
    std::printf("map %zu %zu\n", m.size(), total);

    std::vector<std::unique_ptr<Base>> objs;
    for (int i = 0; i < 30000; i++) {
        switch (i % 4) {
        case 0: objs.emplace_back(new Derived<8>(static_cast<char>(i))); break;
        case 1: objs.emplace_back(new Derived<200>(static_cast<char>(i))); break;
        case 2: objs.emplace_back(new Derived<5000>(static_cast<char>(i))); break;
        default: objs.emplace_back(new Derived<100000>(static_cast<char>(i))); break;
        }
    }
    std::size_t sum = 0;
    for (auto &o : objs) sum += o->value();
    objs.clear();
    std::printf("objects %zu\n", sum);

    for (int round = 0; round < 100; round++) {
        auto *lines = new Line[round + 1];
        auto *page = new Page;
        auto *huge = new Huge;
        CHECK(aligned(lines, 64) && aligned(page, 4096) && aligned(huge, 256));
        delete[] lines;
        delete page;
        delete huge;
    }
    std::printf("aligned ok\n");

    std::vector<std::thread> ts;
    std::vector<std::string> results(4);
    for (int t = 0; t < 4; t++)
        ts.emplace_back([t, &results] {
            std::string s;
            for (int i = 0; i < 20000; i++) s += std::to_string(i * t % 7);
            results[t] = s.substr(0, 10) + " " + std::to_string(s.size());
        });
    for (auto &t : ts) t.join();
    for (auto &r : results) std::printf("thread %s\n", r.c_str());
}

static volatile std::size_t impossible = SIZE_MAX / 2;
// Results go here, so that the compiler cannot drop the allocations.
static void *volatile sink;

// Our operator new symbols are the ones the program uses.
static void hakmem_serves_new() {
    Dl_info info;
    CHECK(dladdr(dlsym(RTLD_DEFAULT, "_Znwm"), &info) != 0);
    CHECK(std::strstr(info.dli_fname, "libhakmem") != nullptr);
    CHECK(dladdr(dlsym(RTLD_DEFAULT, "_ZdlPvm"), &info) != 0);
    CHECK(std::strstr(info.dli_fname, "libhakmem") != nullptr);
    std::printf("ok\n");
}

static void nothrow_returns_null() {
    CHECK(new (std::nothrow) char[impossible] == nullptr);
    CHECK(::operator new(impossible, std::nothrow) == nullptr);
    CHECK(::operator new[](impossible, std::align_val_t(64), std::nothrow) == nullptr);
    std::printf("ok\n");
}

static void throws_bad_alloc() {
    int caught = 0;
    try { sink = ::operator new(impossible); } catch (const std::bad_alloc &) { caught++; }
    try { sink = new char[impossible]; } catch (const std::bad_alloc &) { caught++; }
    // Alignment over what hakmem serves (1 TiB).
    try { sink = ::operator new(100, std::align_val_t((size_t)1 << 41)); } catch (const std::bad_alloc &) { caught++; }
    CHECK(caught == 3);
    std::printf("ok\n");
}

static int handler_calls;
static void handler() {
    if (++handler_calls == 3) std::set_new_handler(nullptr);
}

static void new_handler_is_called() {
    std::set_new_handler(handler);
    bool caught = false;
    try { sink = ::operator new(impossible); } catch (const std::bad_alloc &) { caught = true; }
    CHECK(caught && handler_calls == 3);
    std::printf("ok\n");
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    std::string c = argv[1];
    if (c == "workload") workload();
    else if (c == "hakmem_serves_new") hakmem_serves_new();
    else if (c == "nothrow_returns_null") nothrow_returns_null();
    else if (c == "throws_bad_alloc") throws_bad_alloc();
    else if (c == "new_handler_is_called") new_handler_is_called();
    else return 2;
    return 0;
}
