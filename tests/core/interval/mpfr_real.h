#pragma once
// A scoped MPFR number for the interval tests: 256 bits unless told otherwise, freed on scope
// exit, and usable wherever the MPFR C API takes an mpfr_ptr / mpfr_srcptr.

#include <mpfr.h>

namespace lossbound::test {

/// Working precision of every MPFR reference (the issue asks for >= 200 bits).
inline constexpr mpfr_prec_t kReferenceBits = 256;

/// An mpfr_t that initialises and clears itself.
class Real {
 public:
  explicit Real(mpfr_prec_t bits = kReferenceBits) { mpfr_init2(value_, bits); }
  ~Real() { mpfr_clear(value_); }
  Real(const Real&) = delete;
  Real& operator=(const Real&) = delete;

  operator mpfr_ptr() { return value_; }
  operator mpfr_srcptr() const { return value_; }

 private:
  mpfr_t value_;
};

}  // namespace lossbound::test
