// The MPI world on a real MPI library (OpenMPI on Debian): MPI_COMM_WORLD, byte messages, a
// shared-memory split for the ranks per machine. Compiled only when CMake finds MPI.
#include "app/mpi_world.h"

#include <climits>
#include <mpi.h>
#include <stdexcept>

namespace lossbound::app {

namespace {

[[noreturn]] void fail(const char* call, int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(code, text, &len);
  throw std::runtime_error(std::string("MPI: ") + call + " failed: " + std::string(text, len));
}

void check(const char* call, int code) {
  if (code != MPI_SUCCESS) fail(call, code);
}

class OpenMpiWorld final : public MpiWorld {
 public:
  OpenMpiWorld() {
    // Errors come back as codes (thrown as exceptions) instead of aborting the job silently.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check("MPI_Comm_rank", MPI_Comm_rank(MPI_COMM_WORLD, &mRank));
    check("MPI_Comm_size", MPI_Comm_size(MPI_COMM_WORLD, &mSize));
    MPI_Comm local;
    check("MPI_Comm_split_type",
          MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, mRank, MPI_INFO_NULL, &local));
    MPI_Comm_size(local, &mLocalSize);
    MPI_Comm_free(&local);
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    mHost.assign(name, static_cast<std::size_t>(len));
  }
  ~OpenMpiWorld() override { MPI_Finalize(); }

  int rank() const override { return mRank; }
  int size() const override { return mSize; }
  int localSize() const override { return mLocalSize; }
  std::string hostName() const override { return mHost; }

  void send(int dest, int tag, const std::string& data) override {
    if (data.size() > static_cast<std::size_t>(INT_MAX))
      throw std::runtime_error("MPI: message of " + std::to_string(data.size()) +
                               " bytes is larger than an int can count");
    check("MPI_Send", MPI_Send(data.data(), static_cast<int>(data.size()), MPI_CHAR, dest, tag,
                               MPI_COMM_WORLD));
  }

  std::optional<MpiMessage> poll() override {
    int flag = 0;
    MPI_Status status;
    check("MPI_Iprobe", MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &status));
    if (!flag) return std::nullopt;
    return take(status);
  }

  MpiMessage receive(int source) override {
    MPI_Status status;
    check("MPI_Probe", MPI_Probe(source, MPI_ANY_TAG, MPI_COMM_WORLD, &status));
    return take(status);
  }

  bool allTrue(bool ok) override {
    int mine = ok ? 1 : 0, all = 0;
    check("MPI_Allreduce", MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    return all == 1;
  }

  std::string broadcast(const std::string& data) override {
    long long size = static_cast<long long>(data.size());
    check("MPI_Bcast", MPI_Bcast(&size, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD));
    if (size > INT_MAX) throw std::runtime_error("MPI: broadcast larger than an int can count");
    std::string out = mRank == 0 ? data : std::string(static_cast<std::size_t>(size), '\0');
    check("MPI_Bcast", MPI_Bcast(out.data(), static_cast<int>(size), MPI_CHAR, 0, MPI_COMM_WORLD));
    return out;
  }

 private:
  /// Receives the message `status` describes (probed before, so its size is known).
  MpiMessage take(MPI_Status& status) {
    int count = 0;
    check("MPI_Get_count", MPI_Get_count(&status, MPI_CHAR, &count));
    MpiMessage m;
    m.source = status.MPI_SOURCE;
    m.tag = status.MPI_TAG;
    m.data.resize(static_cast<std::size_t>(count));
    check("MPI_Recv", MPI_Recv(m.data.data(), count, MPI_CHAR, m.source, m.tag, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
    return m;
  }

  int mRank = 0, mSize = 1, mLocalSize = 1;
  std::string mHost;
};

}  // namespace

bool mpiCompiledIn() { return true; }

std::unique_ptr<MpiWorld> startMpi(int& argc, char**& argv, std::string* why) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    *why = "MPI_Init_thread failed (expected to run under mpirun or srun)";
    return nullptr;
  }
  if (provided < MPI_THREAD_FUNNELED) {
    MPI_Finalize();
    *why = "the MPI library does not support threads (expected MPI_THREAD_FUNNELED)";
    return nullptr;
  }
  try {
    return std::make_unique<OpenMpiWorld>();
  } catch (const std::exception& e) {
    *why = e.what();
    return nullptr;
  }
}

}  // namespace lossbound::app
