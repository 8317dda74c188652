// Parquet page checksums verified without decoding a page (python/tumorboard/traj/_pages.py):
// the pages of one column chunk are walked by their headers (the Thrift compact protocol of
// parquet-format's parquet.thrift, PageHeader: field 3 compressed_page_size, field 4 crc), and
// each page's stored CRC-32 is compared with the CRC-32 (zlib's, ISO-HDLC) of its bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tb::traj {

// What the walk over one column chunk found. On a problem, error_at is the byte (within the
// chunk) of the page header where it is, error the reason, and crc_mismatch tells a page whose
// bytes changed from a header that does not parse.
struct PageScan {
  std::int64_t checked = 0;    // pages whose CRC matched
  std::int64_t unchecked = 0;  // pages written without a CRC
  std::int64_t error_at = -1;
  bool crc_mismatch = false;
  std::string error;
};

PageScan verify_pages(const std::uint8_t* data, std::size_t n);

// zlib's crc32 of n bytes (the standard CRC-32, reflected polynomial 0xEDB88320).
std::uint32_t crc32(const std::uint8_t* data, std::size_t n);

}  // namespace tb::traj
