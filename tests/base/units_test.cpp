#include "base/units.h"

#include <gtest/gtest.h>

namespace ccpool {
namespace {

TEST(Units, ParseSize) {
  EXPECT_EQ(*parse_size("1024"), 1024u);
  EXPECT_EQ(*parse_size("10G"), 10ull << 30);
  EXPECT_EQ(*parse_size("10GiB"), 10ull << 30);
  EXPECT_EQ(*parse_size("512M"), 512ull << 20);
  EXPECT_EQ(*parse_size("1.5k"), 1536u);
  EXPECT_FALSE(parse_size("abc"));
  EXPECT_FALSE(parse_size("10X"));
  EXPECT_NE(parse_size("10X").error().message.find("10X"), std::string::npos);
}

TEST(Units, ParseDuration) {
  EXPECT_EQ(parse_duration("250ms")->count(), 250);
  EXPECT_EQ(parse_duration("30s")->count(), 30000);
  EXPECT_EQ(parse_duration("30")->count(), 30000);
  EXPECT_EQ(parse_duration("1h")->count(), 3600000);
  EXPECT_EQ(parse_duration("7d")->count(), 7 * 86400000LL);
  EXPECT_FALSE(parse_duration("soon"));
}

TEST(Units, Format) {
  EXPECT_EQ(format_size(512), "512 B");
  EXPECT_EQ(format_size(1536), "1.5 KiB");
  EXPECT_EQ(format_duration(std::chrono::milliseconds(350)), "350 ms");
  EXPECT_EQ(format_duration(std::chrono::milliseconds(3'720'000)), "1h 2m");
}

}  // namespace
}  // namespace ccpool
