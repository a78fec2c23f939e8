// How much memory a run will need, estimated from its config before anything is allocated, so
// that a size the machine cannot hold (memory.mem_len = 2^31 - 1, d_model = 10^9) is one clear
// error naming the keys and the estimate, instead of std::bad_alloc (or the kernel's OOM killer)
// after the run directory was written.
//
// The estimate follows what the model allocates (float32 throughout; B rows, L queries,
// K = M + L keys, H heads, d = d_model, d_i = d_inner, V = vocab_size, P parameters):
//   parameters       P values + P gradients (+ 2P Adam moments when training)
//   per layer        when training: attention scores and probabilities B*H*L*K each, and their
//                    gradients; evaluation only: none (all layers share R*Hc*L*K scores and an
//                    encoding buffer of that size, (R, Hc) = (B, H) or (1, the heads that fit
//                    the budget), nn/inference_scratch.hpp); queries, keys, values, contexts
//                    and layer inputs ~ 8*B*K*d (x2 when training); feed-forward 2*B*L*d_i (x2
//                    when training); memory B*M*d
//   output           logits and softmax B*L*V (x2 when training)
// It is an upper-end estimate of the same order as the peak resident memory measured by
// eval.json's peak_memory_mb, and is compared with the memory this process may use: physical
// memory, or the address-space limit (ulimit -v) if that is lower.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.hpp"
#include "nn/inference_scratch.hpp"

namespace poslab {

// Bytes a training step (training = true) or an evaluation pass needs, at `batch` rows of
// `seq_len` queries with `mem_len` memory rows. An evaluation pass makes its scores in chunks of
// at most `score_budget_bytes` (nn/inference_scratch.hpp).
double estimated_bytes(const Config& cfg, int batch, int seq_len, int mem_len, bool training,
                       double score_budget_bytes = kInferenceScoreBudgetBytes);

// Bytes this process may use: physical memory, or RLIMIT_AS if lower.
double usable_memory_bytes();

// Throws std::runtime_error "WHAT needs about X GiB ..., more than the Y GiB ..." if the
// estimate exceeds usable_memory_bytes(). `what` names the setting ("training (train.batch_size
// = 16, train.seq_len = 64, memory.mem_len = 0)").
void check_memory(const Config& cfg, int batch, int seq_len, int mem_len, bool training,
                  const std::string& what);

}  // namespace poslab
