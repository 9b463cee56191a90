// Metal's uniform<T>: a value the compiler may assume is the same in every
// thread. It converts to and from T, so arithmetic on it is T's (Metal's
// own operators on uniform values yield uniform values, which convert back).
#pragma once

namespace metal {

template <class T>
struct uniform {
  constexpr uniform(T v) : value(v) {}
  constexpr operator T() const {
    return value;
  }
  T value;
};

template <class T>
constexpr uniform<T> make_uniform(T v) {
  return uniform<T>(v);
}

} // namespace metal
