// Issue 29, class 4: a model of many ops must not take quadratic work to read. nlohmann's parser
// callback made the strict JSON reader quadratic (its DOM builder scans the enclosing list for
// discarded values after every object: 100k ops took 8 s). This test times nothing: it counts the
// parser's work -- the SAX events the strict reader handles plus every step an iterator takes
// over a list of the DOM being built -- for a list of N and of 2N objects, and requires the work
// at 2N to be at most kLinearSlack times the work at N. The quadratic reader fails it by far
// (steps N(N+1)/2: 4x); a linear one takes 2x.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tilegraph/import/json_util.h"
#include "tilegraph/import/strict_json_sax.h"

namespace {

// Steps taken by every CountingList iterator (single-threaded test).
int64_t g_list_steps = 0;

// A std::vector whose iterators count their steps: nlohmann::basic_json's list type, so that a
// scan over a list being built is work the test sees.
template <typename T, typename Allocator = std::allocator<T>>
class CountingList : public std::vector<T, Allocator> {
  using Base = std::vector<T, Allocator>;

 public:
  using Base::Base;
  class iterator {
   public:
    using base_iterator = typename Base::iterator;
    using iterator_category = std::random_access_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = T*;
    using reference = T&;
    iterator() = default;
    iterator(base_iterator it) : it_(it) {}
    operator base_iterator() const { return it_; }
    operator typename Base::const_iterator() const { return it_; }
    reference operator*() const { return *it_; }
    pointer operator->() const { return &*it_; }
    iterator& operator++() {
      ++g_list_steps;
      ++it_;
      return *this;
    }
    iterator operator++(int) {
      iterator before = *this;
      ++*this;
      return before;
    }
    iterator& operator--() {
      --it_;
      return *this;
    }
    iterator operator--(int) {
      iterator before = *this;
      --it_;
      return before;
    }
    iterator& operator+=(difference_type n) {
      g_list_steps += n < 0 ? -n : n;
      it_ += n;
      return *this;
    }
    iterator& operator-=(difference_type n) { return *this += -n; }
    iterator operator+(difference_type n) const {
      iterator moved = *this;
      return moved += n;
    }
    iterator operator-(difference_type n) const {
      iterator moved = *this;
      return moved -= n;
    }
    difference_type operator-(const iterator& other) const { return it_ - other.it_; }
    reference operator[](difference_type n) const { return it_[n]; }
    auto operator<=>(const iterator& other) const = default;
    bool operator==(const iterator& other) const = default;

   private:
    base_iterator it_{};
  };
  iterator begin() { return Base::begin(); }
  iterator end() { return Base::end(); }
  typename Base::const_iterator begin() const { return Base::begin(); }
  typename Base::const_iterator end() const { return Base::end(); }
  iterator erase(iterator at) { return Base::erase(typename Base::const_iterator(at)); }
  iterator erase(iterator first, iterator last) {
    return Base::erase(typename Base::const_iterator(first), typename Base::const_iterator(last));
  }
  template <typename... Args>
  iterator insert(iterator at, Args&&... args) {
    return Base::insert(typename Base::const_iterator(at), std::forward<Args>(args)...);
  }
  template <typename... Args>
  iterator insert(typename Base::const_iterator at, Args&&... args) {
    return Base::insert(at, std::forward<Args>(args)...);
  }
};

using CountingJson = nlohmann::basic_json<std::map, CountingList>;

// The work of reading a model-like document whose "ops" list holds `n` objects.
int64_t parse_work(int n) {
  std::string text = R"({"format": "tessel-model", "ops": [)";
  for (int i = 0; i < n; ++i)
    text += (i ? ", " : "") + std::string(R"({"name": "op)") + std::to_string(i) +
            R"(", "op": "Relu", "inputs": ["x"], "outputs": ["y"]})";
  text += "]}";
  CountingJson result;
  tessel::json_util::StrictSax<CountingJson> sax(result, "chain.json");
  g_list_steps = 0;
  REQUIRE(CountingJson::sax_parse(text, &sax));
  REQUIRE(result["ops"].size() == static_cast<size_t>(n));
  return sax.events() + g_list_steps;
}

// A linear reader's work doubles; the slack covers the document's constant part.
constexpr double kLinearSlack = 2.2;
// Large enough that a scan of the list after each object (N(N+1)/2 steps) dominates the events.
constexpr int kObjects = 20000;

}  // namespace

TEST_CASE("the strict JSON reader's work grows linearly with a list's length") {
  const int64_t at_n = parse_work(kObjects), at_2n = parse_work(2 * kObjects);
  INFO("work at ", kObjects, " objects: ", at_n, ", at ", 2 * kObjects, ": ", at_2n);
  CHECK(at_n > 0);
  CHECK(static_cast<double>(at_2n) <= kLinearSlack * static_cast<double>(at_n));
}
