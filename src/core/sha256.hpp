// SHA-256 (FIPS 180-4), for provenance: a fine-tuned run records the hash of its parent's
// config.toml and checkpoint, so that "started from that run" can be checked later with
// standard tools (`sha256sum RUN/config.toml`). Not for speed and not for secrets.
//
//   Sha256 h;                     // or sha256_hex(bytes) for one piece of text
//   h.update(first_file_bytes);
//   h.update(second_file_bytes);
//   std::string hex = h.hex();    // 64 lowercase hex digits, as sha256sum prints
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace poslab {

class Sha256 {
 public:
  Sha256();
  void update(std::string_view bytes);
  // The digest of everything given so far, as 64 lowercase hex digits. Call once: it pads the
  // message, so the object is finished afterwards.
  std::string hex();

 private:
  void compress(const unsigned char* block);  // one 64-byte block into the state
  std::array<std::uint32_t, 8> state_;        // H0..H7
  std::array<unsigned char, 64> buffer_{};    // the bytes of an unfinished block
  std::size_t buffered_ = 0;
  std::uint64_t length_bytes_ = 0;            // message length so far
};

// SHA-256 of `bytes` in hex.
std::string sha256_hex(std::string_view bytes);

}  // namespace poslab
