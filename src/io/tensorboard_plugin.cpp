// io/tensorboard_plugin.cpp — libsheaf_tensorboard.so: TensorBoard Event messages built with the
// classes protoc generates from io/tensorboard.proto (protobuf-lite) and serialized for the
// binary, which loads this library with dlopen at its first TensorBoard record (io/tensorboard.cpp).
// Built as its own library so that the binary links no protobuf.
#include <cstdlib>
#include <cstring>
#include <string>

#include "io/tensorboard_abi.h"
#include "tensorboard.pb.h"  // generated at build time

#define SHEAF_TB_EXPORT __attribute__((visibility("default")))

extern "C" SHEAF_TB_EXPORT int sheaf_tb_abi(void) { return SHEAF_TB_ABI; }

extern "C" SHEAF_TB_EXPORT int64_t sheaf_tb_event(double wall_time, int64_t step, const char* file_version,
                                                  const sheaf_tb_value* values, int64_t n, char** out) {
  try {
    tensorflow::Event event;
    event.set_wall_time(wall_time);
    event.set_step(step);
    if (file_version) {
      event.set_file_version(file_version);
    } else {
      tensorflow::Summary* summary = event.mutable_summary();
      for (int64_t i = 0; i < n; ++i) {
        const sheaf_tb_value& v = values[i];
        tensorflow::Summary::Value* out_value = summary->add_value();
        out_value->set_tag(v.tag);
        if (!v.histogram) {
          out_value->set_simple_value(v.scalar);
          continue;
        }
        tensorflow::HistogramProto* h = out_value->mutable_histo();
        h->set_min(v.min);
        h->set_max(v.max);
        h->set_num(v.num);
        h->set_sum(v.sum);
        h->set_sum_squares(v.sum_squares);
        for (int64_t b = 0; b < v.buckets; ++b) {
          h->add_bucket_limit(v.bucket_limit[b]);
          h->add_bucket(v.bucket[b]);
        }
      }
    }
    std::string bytes = event.SerializeAsString();
    *out = static_cast<char*>(std::malloc(bytes.size() + 1));
    if (!*out) return -1;
    std::memcpy(*out, bytes.data(), bytes.size());
    return static_cast<int64_t>(bytes.size());
  } catch (...) {  // no exception crosses the C interface
    return -1;
  }
}
