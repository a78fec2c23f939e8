// FLOP accounting of `poslab bench`: the product list (model/products.hpp), the closed formula
// (model/flops.hpp) and the FLOPs counted in the sgemm calls of a real training step agree.
#include <catch2/catch.hpp>

#include "bench/training_speed.hpp"
#include "core/blas.hpp"
#include "model/flops.hpp"
#include "model/products.hpp"
#include "train/train.hpp"

using namespace poslab;

namespace {
Config small(const std::string& encoding, int mem_len) {
  Config c;
  c.model.d_model = 32;
  c.model.n_layers = 2;
  c.model.n_heads = 4;
  c.model.d_inner = 64;
  c.train.seq_len = 16;
  c.train.batch_size = 3;
  c.train.threads = 1;
  c.encoding.type = encoding;
  c.memory.mem_len = mem_len;
  return c;
}
}  // namespace

TEST_CASE("the product list sums to the FLOP formula", "[bench][flops]") {
  const int mem_len = GENERATE(0, 16, 40);
  const Config c = small("none", mem_len);
  double flops = 0;
  for (const MatrixProduct& p : training_products(c.model, 3, 16, mem_len)) flops += p.flops();
  CHECK(flops / (3.0 * 16) == Approx(training_flops_per_token(c.model, 16, mem_len)));
}

TEST_CASE("a training step's counted sgemm FLOPs are the model's products, plus the encoding's",
          "[bench][flops]") {
  const int mem_len = GENERATE(0, 16);
  INFO("memory " << mem_len);
  set_threads(1);
  const BenchResult none = bench_training(small("none", mem_len), 1, 1);
  CHECK(none.flops_per_token == Approx(none.model_flops_per_token).epsilon(1e-12));
  // Transformer-XL adds products of its own (R W_kR, q_h Rk_h^T, u_h k_h, ...).
  const BenchResult xl = bench_training(small("transformer_xl", mem_len), 1, 1);
  CHECK(xl.flops_per_token > xl.model_flops_per_token * 1.01);
  CHECK(counted_gemm_flops() == 0);  // counting is off again (and restarted)
}
