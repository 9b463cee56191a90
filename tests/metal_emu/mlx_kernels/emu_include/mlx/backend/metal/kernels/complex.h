// The emulator's stand-in for MLX's complex.h, found before MLX's own on
// the include path of the emulator's MLX builds (test_mlx_kernels.py).
// MLX's utils.h includes complex.h, which overloads complex_t's
// constructors, conversions and compound assignments on the address space
// of `this` and of reference parameters (one overload each for thread,
// threadgroup, device and constant), and checks half arithmetic in a
// static_assert. A host compiler has one address space, so those overloads
// collide there. No kernel run here computes with complex numbers: this
// declares complex_t with the members and conversions the headers these
// kernels include name outside complex templates (utils.h's complex64_t
// functions, steel's complex GEMM specialisation), with their meaning.
#pragma once

template <typename T>
struct complex_t {
  using value_type = T;

  T real;
  T imag;

  constexpr complex_t(T real, T imag) : real(real), imag(imag) {}
  constexpr complex_t() : real(0), imag(0) {}
};

typedef complex_t<float> complex64_t;

template <typename T>
static constexpr constant bool is_complex_v = false;

template <typename T>
static constexpr constant bool is_complex_v<complex_t<T>> = true;
