#pragma once
// The one HDF5 toolkit of Lossbound (run files and the results cache): an owning handle, a scope
// that keeps HDF5 from printing its error stack, the reason of the last failure, and the lock.
//
// Locking policy: every function that calls HDF5 holds an Hdf5Lock for the duration of its calls.
// Debian 12's libhdf5 (serial) is built thread-safe (H5_HAVE_THREADSAFE: the library serializes
// every API call itself), and then Hdf5Lock takes nothing. Against an HDF5 built without it,
// Hdf5Lock is one process-wide recursive mutex, so concurrent readers and the cache never call
// into the library at the same time. Error stacks are per thread either way.

#include <hdf5.h>

#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace lossbound {

/// Owns one HDF5 identifier and closes it with the matching H5*close; move-only.
class Hdf5Handle {
 public:
  /// Holds nothing.
  Hdf5Handle() = default;
  /// Takes `id` (negative: a failed call, held as invalid) to be closed with `close`.
  Hdf5Handle(hid_t id, herr_t (*close)(hid_t)) : mId(id), mClose(close) {}
  Hdf5Handle(Hdf5Handle&& o) noexcept : mId(std::exchange(o.mId, -1)), mClose(o.mClose) {}
  Hdf5Handle& operator=(Hdf5Handle&& o) noexcept {
    if (this != &o) {
      reset();
      mId = std::exchange(o.mId, -1);
      mClose = o.mClose;
    }
    return *this;
  }
  Hdf5Handle(const Hdf5Handle&) = delete;
  Hdf5Handle& operator=(const Hdf5Handle&) = delete;
  ~Hdf5Handle() { reset(); }

  /// Closes the identifier now (if valid).
  void reset() {
    if (mId >= 0 && mClose) mClose(mId);
    mId = -1;
  }
  /// Returns the identifier (negative when invalid).
  hid_t get() const { return mId; }
  /// Returns true for a valid identifier.
  bool valid() const { return mId >= 0; }

 private:
  hid_t mId = -1;
  herr_t (*mClose)(hid_t) = nullptr;
};

/// Keeps HDF5 from printing its error stack on this thread while alive (failures become our own
/// messages, with hdf5Reason()); restores the previous handler afterwards.
class Hdf5Quiet {
 public:
  Hdf5Quiet() {
    H5Eget_auto2(H5E_DEFAULT, &mFunc, &mData);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~Hdf5Quiet() { H5Eset_auto2(H5E_DEFAULT, mFunc, mData); }
  Hdf5Quiet(const Hdf5Quiet&) = delete;
  Hdf5Quiet& operator=(const Hdf5Quiet&) = delete;

 private:
  H5E_auto2_t mFunc = nullptr;
  void* mData = nullptr;
};

/// Returns the innermost message of this thread's HDF5 error stack ("truncated file: eof = ...")
/// and clears the stack; "" when it is empty.
inline std::string hdf5Reason() {
  std::vector<std::string> messages;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_DOWNWARD,
      [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
        if (e && e->desc && *e->desc)
          static_cast<std::vector<std::string>*>(data)->push_back(e->desc);
        return 0;
      },
      &messages);
  H5Eclear2(H5E_DEFAULT);
  return messages.empty() ? std::string() : messages.back();
}

/// Serializes HDF5 calls when the library does not (see the locking policy above).
class Hdf5Lock {
 public:
#ifdef H5_HAVE_THREADSAFE
  Hdf5Lock() {}  // user-provided: a scope guard, not an unused variable
  ~Hdf5Lock() {}
#else
  Hdf5Lock() : mLock(mutex()) {}

 private:
  static std::recursive_mutex& mutex() {
    static std::recursive_mutex m;
    return m;
  }
  std::unique_lock<std::recursive_mutex> mLock;
#endif
};

}  // namespace lossbound
