/* io/tensorboard_abi.h — the C interface of libsheaf_tensorboard.so (io/tensorboard_plugin.cpp),
 * which serializes TensorBoard Event messages with protobuf-lite; the binary (io/tensorboard.cpp)
 * frames and writes them. Changing a struct or a signature bumps SHEAF_TB_ABI. */
#ifndef SHEAF_TENSORBOARD_ABI_H
#define SHEAF_TENSORBOARD_ABI_H
#include <stdint.h>

#define SHEAF_TB_ABI 1

/* One Summary.Value: a scalar, or (histogram != 0) a histogram whose bucket i counts
 * bucket[i] values in (bucket_limit[i-1], bucket_limit[i]]. */
typedef struct {
  const char* tag;
  int histogram;
  float scalar;
  double min, max, num, sum, sum_squares;
  const double* bucket_limit;
  const double* bucket;
  int64_t buckets;
} sheaf_tb_value;

#ifdef __cplusplus
extern "C" {
#endif
int sheaf_tb_abi(void);
/* The serialized Event: file_version when it is not NULL, else a Summary of the n values.
 * Returns its size and a malloc'd buffer in *out (the caller frees it), or -1. */
int64_t sheaf_tb_event(double wall_time, int64_t step, const char* file_version, const sheaf_tb_value* values,
                       int64_t n, char** out);
#ifdef __cplusplus
}
#endif
#endif
