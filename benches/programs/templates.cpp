// A C++ translation unit shaped like much of today's C++: standard containers nested in
// each other, <regex>, <variant>, <functional>, lambdas and a recursive template, so that
// the compiler instantiates many templates. Compiled by `cargo xtask programs`
// (the `g++` row) with `g++ -O2 -c`; `cc1plus` keeps its trees in garbage-collected pages
// of its own and takes much else (vectors, hash tables, obstacks) from `malloc`.
#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

template <int N> struct Fib {
    static constexpr long value = Fib<N - 1>::value + Fib<N - 2>::value;
};
template <> struct Fib<0> {
    static constexpr long value = 0;
};
template <> struct Fib<1> {
    static constexpr long value = 1;
};

template <typename T, int N> struct Tree {
    std::vector<Tree<T, N - 1>> children;
    T value;
};
template <typename T> struct Tree<T, 0> {
    T value;
};

using Value = std::variant<int, double, std::string, std::vector<int>>;
using Index =
    std::map<std::string, std::vector<std::unordered_map<int, std::set<std::string>>>>;

int main() {
    Index index;
    std::regex assignment("([a-z]+)\\s*=\\s*([0-9]+)");
    std::vector<Value> values{1, 2.5, std::string("x"), std::vector<int>{1, 2}};
    Tree<std::string, 6> tree;
    std::optional<std::shared_ptr<Tree<int, 4>>> shared;
    std::stringstream out;
    out << Fib<40>::value;
    std::sort(values.begin(), values.end(),
              [](const Value &a, const Value &b) { return a.index() < b.index(); });
    std::function<int(int)> count = [&](int x) { return x + static_cast<int>(index.size()); };
    std::cout << out.str() << count(1) << std::regex_match("a = 1", assignment)
              << tree.value << shared.has_value() << std::endl;
}
