#pragma once
// Device-resident evaluation of a step program in the interval domain, written once against the
// Device primitives (core/device.h): the program's inputs are uploaded when a device node first
// needs them, every intermediate a device node makes stays in device memory, and only what the
// caller reads (the requested outputs: the loss, gradients) and what a host-fallback node needs is
// copied out. Device memory is freed after the last user of a value in program order.
//
// Which nodes run on the device is not a second copy of the op rules. Each node's plan is taken
// from its own CPU rule: the rule's interval() runs once on placeholder operands through a
// recording Backend that offers every interval kernel hook (core/backend.h). When the rule's
// result is exactly what its hook calls wrote (or its operand's own storage: a view, or data that
// do not depend on the operands at all: a creation op), that sequence of hook calls is the node's
// device plan, with each hook operand resolved to an operand of the node, an earlier hook's
// result or a constant the rule made (a scalar's enclosure). The rule runs twice, on two
// different placeholder fillings, and the two plans must agree bit for bit, so a plan cannot
// depend on operand values (those are on the device). The exception is an integer operand that no
// program input reaches (an index computed from arange in the program): it is the same in every
// replay from the same start node, so both recordings use its value (copied out once, when the
// plan is made) and a rule that needs exact indices can plan. Any difference, a GEMM, host
// arithmetic on the operands, or an exception makes the node a host-fallback node: its operands are
// copied out, the CPU rule runs on the host Backend, and its results are copied in when a device
// node needs them. Plans depend only on metadata and are kept per node across replays.
//
// Bit-identity with evaluate(): a device node runs the hook calls the CPU rule makes with a
// kernel-offering backend, and the hooks give the same bits as the CPU rules'
// host arithmetic (tests/gpu/test_kernel_offload). One difference is data-dependent: the
// elementwise and sum offers (core/ops/kernel_offload.h) are declined for operands with a
// non-finite endpoint (the host rules keep exact ±inf semantics). Host-side operands are checked
// before the launch; device-side ones are flagged on the device (flagNonFinite) and the flag is
// read once at the end: if it is set, the replay is evaluated again on the host (the device
// result was sound, but wider than the reference) and the stats say so.
//
// Out of device memory: the node that could not allocate runs on the host instead, with a
// message in the stats; nothing is lost, the results are the same bits.

#include "core/device.h"
#include "core/program/evaluator.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace lossbound {

class Backend;

/// What one resident replay did, and where.
struct ResidentStats {
  DeviceCounters device;               ///< the device's counters over this replay (peak included)
  std::int64_t inputUploads = 0;       ///< arrays of program inputs/constants copied in
  std::int64_t constantUploads = 0;    ///< arrays of rule-made constants copied in (once per plan)
  std::int64_t boundaryUploads = 0;    ///< arrays of host-fallback results copied in
  std::int64_t boundaryDownloads = 0;  ///< arrays copied out for host-fallback nodes
  std::int64_t outputDownloads = 0;    ///< arrays of the requested outputs copied out
  std::int64_t controlTransfers = 0;   ///< the non-finite flag: set up and read once
  std::int64_t constantBytes = 0;      ///< device bytes of plan constants kept for later replays
  std::size_t nodesOnDevice = 0;       ///< nodes run as device launches
  std::size_t nodesAliased = 0;        ///< views of device data: no launch, no transfer
  std::size_t nodesConstant = 0;       ///< results independent of the operands, made on the host
  std::size_t nodesOnHost = 0;         ///< host-fallback nodes (the CPU rule on host operands)
  std::size_t nodesKept = 0;       ///< host-fallback nodes that read no program input: kept results
  std::size_t nodesHostViews = 0;  ///< views/gathers of host-only data, kept on the host
  std::size_t hostFallbackOperands = 0;  ///< operand values of host-fallback nodes
  std::size_t hostFallbackResults = 0;   ///< result values of host-fallback nodes
  std::size_t outOfMemoryNodes = 0;      ///< nodes sent to the host because an allocation failed
  bool rerunOnHost = false;  ///< a device operand had a non-finite endpoint: host evaluation used
  std::size_t nodesFlagged = 0;  ///< device nodes that met a non-finite operand in this replay
  std::size_t nodesPinned = 0;   ///< nodes run on the host because they met one in an earlier one
  std::map<std::string, int> hostOps;              ///< op → number of host-fallback nodes
  std::map<std::string, std::string> hostReasons;  ///< op → why (its first node's plan)
  std::vector<std::string> messages;               ///< user-facing notes (out of memory, rerun)
};

/// The outputs of a resident replay and what it did.
struct ResidentResult {
  EvalResult result;
  ResidentStats stats;
};

/// Evaluates one program device-resident, replay after replay (see the file comment). Keeps the
/// per-node plans and the device copies of rule-made constants until destroyed.
class ResidentEvaluator {
 public:
  /// Binds the program, the device and the host Backend that runs host-fallback nodes (the
  /// reference CPU backend for bit-identity).
  ResidentEvaluator(const Program& program, Device& device, Backend& host);
  ~ResidentEvaluator();
  ResidentEvaluator(const ResidentEvaluator&) = delete;
  ResidentEvaluator& operator=(const ResidentEvaluator&) = delete;

  /// Evaluates the requested outputs like evaluate(program, inputs, host, options), with the
  /// interval nodes on the device; other domains run evaluate() on the host. Throws what
  /// evaluate() throws.
  ResidentResult evaluate(const TensorMap& inputs, const EvalOptions& options = {});

  /// Returns the program this evaluator is bound to.
  const Program& program() const;

  /// Returns the number of nodes that have a device plan (views and creation ops included), of
  /// those planned so far.
  std::size_t plannedDeviceNodes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> mImpl;
};

}  // namespace lossbound
