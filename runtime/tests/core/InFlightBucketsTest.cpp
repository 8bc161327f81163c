// asrt_bucket_start's bookkeeping: handles, misuse, and slot reuse.
#include "core/InFlightBuckets.h"

#include <gtest/gtest.h>

using namespace autoshard::rt;

namespace {

auto message(const Expected<InFlightBucket *> &found) {
  return found ? std::string("found") : found.message();
}

/// A closed all-reduce bucket of `members` members over a group of 2.
OpenBucket &closedBucket(OpenBucket &b, int members) {
  static float x[8];
  EXPECT_TRUE(
      b.begin(ASRT_BUCKET_ALL_REDUCE, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 1, 2)
          .ok());
  for (int m = 0; m < members; ++m)
    EXPECT_TRUE(b.add(x, x, 8).ok());
  EXPECT_TRUE(b.close("asrt_bucket_start").ok());
  return b;
}

TEST(InFlightBucketsTest, HandlesCountFromOneInIssueOrder) {
  InFlightBuckets inflight;
  OpenBucket b;
  EXPECT_EQ(inflight.lastHandle(), 0);
  InFlightBucket &first = inflight.issue(closedBucket(b, 2));
  InFlightBucket &second = inflight.issue(closedBucket(b, 1));
  EXPECT_EQ(first.handle, 1);
  EXPECT_EQ(second.handle, 2);
  EXPECT_EQ(inflight.inFlight(), 2u);
  // The slots hold the members; the context's bucket can open again.
  EXPECT_EQ(first.bucket.members().size(), 2u);
  EXPECT_EQ(second.bucket.members().size(), 1u);
  EXPECT_FALSE(b.isOpen());
  ASSERT_TRUE(inflight.find(2));
  EXPECT_EQ(*inflight.find(2), &second);
  EXPECT_EQ(*inflight.find(1), &first);
}

TEST(InFlightBucketsTest, UnknownAndWaitedHandlesAreErrors) {
  InFlightBuckets inflight;
  OpenBucket b;
  EXPECT_EQ(message(inflight.find(1)),
            "handle 1 was not returned by asrt_bucket_start on this context "
            "(it has issued none)");
  inflight.issue(closedBucket(b, 1));
  InFlightBucket &two = inflight.issue(closedBucket(b, 1));
  inflight.release(two);
  EXPECT_EQ(message(inflight.find(2)),
            "handle 2 was already waited; wait each handle exactly once");
  EXPECT_EQ(message(inflight.find(7)),
            "handle 7 was not returned by asrt_bucket_start on this context "
            "(its handles are 1..2)");
  EXPECT_EQ(message(inflight.find(0)),
            "handle 0 was not returned by asrt_bucket_start on this context "
            "(its handles are 1..2)");
  EXPECT_EQ(message(inflight.find(1)), "found");
}

TEST(InFlightBucketsTest, SlotsAndTheirBuffersAreReusedAcrossSteps) {
  // Declared first: the slots' pack buffers are its memory.
  std::unique_ptr<Device> device = makeHostDevice();
  InFlightBuckets inflight;
  OpenBucket b;
  // Step 1: two buckets in flight at once, waited in reverse order.
  InFlightBucket *a = &inflight.issue(closedBucket(b, 2));
  InFlightBucket *c = &inflight.issue(closedBucket(b, 1));
  void *aBuffer = a->packBuffer(*device, 4096);
  void *cBuffer = c->packBuffer(*device, 64);
  EXPECT_NE(aBuffer, cBuffer) << "each in-flight bucket packs on its own";
  inflight.release(*c);
  inflight.release(*a);
  // Steps 2 and 3: the same buckets get the same slots and buffers back.
  for (int step = 2; step <= 3; ++step) {
    InFlightBucket &a2 = inflight.issue(closedBucket(b, 2));
    InFlightBucket &c2 = inflight.issue(closedBucket(b, 1));
    EXPECT_EQ(&a2, a) << "step " << step;
    EXPECT_EQ(&c2, c) << "step " << step;
    EXPECT_EQ(a2.packBuffer(*device, 4096), aBuffer) << "no allocation in step " << step;
    EXPECT_EQ(c2.packBuffer(*device, 64), cBuffer) << "no allocation in step " << step;
    inflight.release(c2);
    inflight.release(a2);
  }
  EXPECT_EQ(inflight.slots(), 2u) << "the most buckets ever in flight";
  EXPECT_EQ(inflight.lastHandle(), 6);
}

TEST(InFlightBucketsTest, UnwaitedBucketsAreListed) {
  InFlightBuckets inflight;
  OpenBucket b;
  EXPECT_TRUE(inflight.checkAllWaited("step 1 returned").ok());
  InFlightBucket &one = inflight.issue(closedBucket(b, 2));
  one.info.name = "bucket_all_reduce";
  one.info.handle = one.handle;
  one.info.mask = 1;
  one.info.groupSize = 2;
  one.info.bytes = 128;
  one.info.members = 2;
  Status s = inflight.checkAllWaited("step 2 returned");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "step 2 returned with 1 asynchronous collective not waited: "
            "bucket_all_reduce of handle 1 (f32, 2 members, sending 128 bytes "
            "over grid_axes_mask 1, a group of 2 ranks); every "
            "asrt_bucket_start handle must be waited with asrt_wait before "
            "the step returns");
}

} // namespace
