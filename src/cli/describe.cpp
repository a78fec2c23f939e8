// `poslab encodings --describe rope`: the frequency table of a RoPE configuration, one row per
// rotation pair, as the formulas of src/encodings/rope_scaling.hpp give it (docs/05-beyond.md,
// "Extending the context of a RoPE model"):
//
//   pair i, its dimensions (2i, 2i+1);
//   theta        the trained inverse frequency b^(-2i/d);
//   theta_scaled theta'_i, what the scaled model rotates by;
//   wavelength   2 pi / theta'_i, in tokens;
//   rotations_L  L / lambda_i = L theta_i / (2 pi): the turns the trained pair makes over
//                original_len (what YaRN's ramp and llama3's bands read); empty if L is not set;
//   interpolation g_i, the weight of the interpolated (divided by s) frequency;
//   attention_factor  a, on q and on k (logits by a^2);
//   short_factor, long_factor  (longrope only) LongRoPE's lambda_i of each list; the first line
//                says which one the call uses (K > L: long, strict, as Hugging Face).
//   self_extend, rerope, leaky_rerope: a last line gives the two position maps and the window.
// With log_n on (log_n_scaling.hpp; any encoding has it), a last line gives its factor at n = K.
//
// The key count K (dynamic_ntk) is --length, by default train.seq_len + memory.mem_len (a
// training call with a full memory).
#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "cli/commands.hpp"
#include "encodings/log_n_scaling.hpp"
#include "encodings/rope_scaling.hpp"
#include "encodings/rotary.hpp"

namespace poslab {

namespace {

// Exactly: the shortest text that reads back as the same double.
std::string exact(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", x);
  return buffer;
}

std::string short_number(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", x);
  return buffer;
}

// The table: a header and one row per rotation pair (rows: scaled_frequencies' output).
struct FrequencyTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

FrequencyTable frequency_table(const RopeScaling& scaling, const std::vector<RotaryPair>& pairs,
                               bool csv) {
  const double L = double(scaling.original_len), a = scaling.attention_factor();
  const double pi = 3.14159265358979323846;
  const bool longrope = scaling.method == RopeScalingMethod::longrope;
  FrequencyTable table;
  table.header = {"pair",          "dims",       "theta",       "theta_scaled",
                  "wavelength",    "rotations_L", "interpolation", "attention_factor"};
  if (longrope) table.header.insert(table.header.end(), {"short_factor", "long_factor"});
  auto number = [&](double x) { return csv ? exact(x) : short_number(x); };
  for (int i = 0; i < int(pairs.size()); ++i) {
    const RotaryPair& r = pairs[i];
    table.rows.push_back({std::to_string(i),
                          std::to_string(2 * i) + (csv ? " " : ",") + std::to_string(2 * i + 1),
                          number(r.theta), number(r.theta_scaled), number(2 * pi / r.theta_scaled),
                          L > 0 ? number(L * r.theta / (2 * pi)) : (csv ? "" : "-"),
                          number(r.interpolation), number(a)});
    if (longrope)
      table.rows.back().insert(table.rows.back().end(),
                               {number(scaling.short_factor[i]), number(scaling.long_factor[i])});
  }
  return table;
}

void print_csv(const FrequencyTable& table, std::ostream& out) {
  for (std::size_t c = 0; c < table.header.size(); ++c) out << (c ? "," : "") << table.header[c];
  out << "\n";
  for (const auto& row : table.rows) {
    for (std::size_t c = 0; c < row.size(); ++c) out << (c ? "," : "") << row[c];
    out << "\n";
  }
}

// Columns right-aligned to their widest cell, two spaces apart.
void print_aligned(const FrequencyTable& table, std::ostream& out) {
  std::vector<std::size_t> width(table.header.size());
  for (std::size_t c = 0; c < table.header.size(); ++c) {
    width[c] = table.header[c].size();
    for (const auto& row : table.rows) width[c] = std::max(width[c], row[c].size());
  }
  for (std::size_t c = 0; c < table.header.size(); ++c)
    out << (c ? "  " : "") << std::setw(int(width[c])) << table.header[c];
  out << "\n";
  for (const auto& row : table.rows) {
    for (std::size_t c = 0; c < row.size(); ++c)
      out << (c ? "  " : "") << std::setw(int(width[c])) << row[c];
    out << "\n";
  }
}

// The first line: the configuration, and which factor dynamic_ntk and longrope use at K keys.
void print_title(const Options& o, const RopeScaling& scaling, int d_head, int pairs,
                 long key_len, std::ostream& out) {
  out << "rope: d_h " << d_head << ", rotated d = " << 2 * pairs << " (fraction "
      << short_number(o.get_double("fraction")) << "), base " << short_number(o.get_double("base"))
      << ", scaling " << o.get_string("scaling") << ", factor s = " << short_number(scaling.factor)
      << ", original_len L = "
      << (scaling.original_len > 0 ? std::to_string(scaling.original_len) : "not set")
      << ", keys K = " << key_len;
  if (scaling.method == RopeScalingMethod::dynamic_ntk)
    out << " (dynamic factor s K / L - (s - 1) = " << short_number(scaling.dynamic_factor(key_len))
        << (key_len > scaling.original_len ? "" : ": K <= L, the trained base") << ")";
  if (scaling.method == RopeScalingMethod::longrope) {
    const std::string which = scaling.uses_long_factors(key_len) ? "long" : "short";
    out << ", factors " << which;
    if (scaling.depends_on_key_count())
      out << (which == "long" ? " (K > L)" : " (K <= L)");
    else
      out << " (fixed)";
    if (scaling.start_tokens > 0)
      out << ", start_tokens " << scaling.start_tokens;
  }
  out << "\n";
}

// After the table: the formulas, then what longrope and the position-changing methods
// (rope_position_maps.hpp: the two maps and the window) do beyond them.
void print_method_notes(const RopeScaling& scaling, long key_len, std::ostream& out) {
  out << "theta' = theta_scaled = theta / s * g + theta * (1 - g), g = interpolation (ntk, "
         "dynamic_ntk: the equivalent g);\nwavelength = 2 pi / theta'; rotations_L = L theta / "
         "(2 pi), of the trained pair; q and k are each multiplied by attention_factor.\n";
  if (scaling.method == RopeScalingMethod::longrope) {
    out << "longrope: theta' = 1 / (lambda_i b^(2i/d)), lambda = the factors in use; "
           "interpolation is the equivalent g = (1 - theta'/theta) / (1 - 1/s).\n";
    if (scaling.start_tokens > 0)
      out << "positions 0 .. " << scaling.start_tokens - 1
          << " (start tokens) turn by theta, with amplitude 1.\n";
  }
  const std::int64_t w = scaling.rerope_window;
  const long N = key_len;  // the farthest distance of a call over K keys is K - 1
  if (scaling.method == RopeScalingMethod::self_extend) {
    const std::int64_t G = scaling.group_size, W = scaling.neighbor_window;
    out << "self_extend: distances r < W = " << W << " plain; r >= W: query at t // G + W - W // G"
        << " = t // " << G << " + " << W - W / G << ", key at t // " << G
        << " (G = group_size; integer division).\nlargest position used at K = " << N << ": "
        // Every pair is a neighbour while K - 1 < W; beyond, the farthest pair (K - 1, 0) is
        // grouped, at (K - 1) // G + W - W // G >= W.
        << (N - 1 < W ? N - 1 : (N - 1) / G + W - W / G) << " (trained: < L = "
        << scaling.original_len << "); the map stays inside L up to K = (L - W) G + W = "
        << (scaling.original_len - W) * G + W << " keys.\n";
  } else if (scaling.method == RopeScalingMethod::rerope) {
    out << "rerope: r' = min(r, w), w = rerope_window = " << w
        << ": far pairs read distance w (query at w, key unrotated).\n";
  } else if (scaling.method == RopeScalingMethod::leaky_rerope) {
    out << "leaky_rerope: r' = r for r < w = " << w << ", w + (r - w) / k beyond (k = leaky_factor = "
        << short_number(scaling.leaky_factor) << "); at r = K - 1 = " << N - 1 << ": "
        << short_number(N - 1 < w ? double(N - 1) : w + (N - 1 - w) / scaling.leaky_factor)
        << ".\n";
  }
}

}  // namespace

int describe_encoding(const Config& cfg, long length, bool csv, std::ostream& out) {
  if (cfg.encoding.type != "rope")
    throw std::invalid_argument("encodings --describe: only rope has a frequency table (got '" +
                                cfg.encoding.type + "')");
  const Options& o = cfg.encoding.options;
  const int d_head = cfg.model.d_model / cfg.model.n_heads;
  const int pairs = rotated_pairs(o.get_double("fraction"), d_head);
  const RopeScaling scaling = rope_scaling_from_options(o);
  const long key_len = length > 0 ? length : long(cfg.train.seq_len) + cfg.memory.mem_len;
  std::vector<RotaryPair> rows(pairs);
  scaled_frequencies(scaling, o.get_double("base"), pairs, key_len, rows.data());
  const FrequencyTable table = frequency_table(scaling, rows, csv);
  if (csv) {
    print_csv(table, out);
    return 0;
  }
  print_title(o, scaling, d_head, pairs, key_len, out);
  print_aligned(table, out);
  print_method_notes(scaling, key_len, out);
  const LogNScaling log_n = log_n_from_options(o);
  if (log_n.mode != LogNScaling::Mode::off)
    out << "log_n = " << o.get_string("log_n")
        << (log_n.mode == LogNScaling::Mode::eval ? " (evaluation passes only)" : " (training too)")
        << ": the logits of a query that sees n keys are multiplied by max(1, ln n / ln "
        << log_n.len << "); at n = K = " << key_len << ": " << short_number(log_n.factor(key_len))
        << "\n";
  return 0;
}

}  // namespace poslab
