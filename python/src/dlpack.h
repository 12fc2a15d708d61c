/* dlpack.h — the structures of the DLPack exchange format (v1.x, with the
 * legacy unversioned managed tensor), as its specification lays them out.
 * Only what agrl's Python module reads and writes. */
#ifndef AGRL_PY_DLPACK_H
#define AGRL_PY_DLPACK_H

#include <stdint.h>

#define AGPY_DLPACK_MAJOR 1
#define AGPY_DLPACK_MINOR 0

enum { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLVulkan = 7, kDLCUDAManaged = 13 };
enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6 };

#define DLPACK_FLAG_BITMASK_READ_ONLY (1ull << 0)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1ull << 1)

typedef struct {
  int32_t device_type; /* DLDeviceType, an int-sized enum */
  int32_t device_id;
} DLDevice;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides; /* in elements; NULL: compact row-major */
  uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

/* The table of C functions a framework may publish on its array type as
 * `type.__dlpack_c_exchange_api__`, a capsule named "dlpack_exchange_api"
 * (DLPack 1.3): conversions without Python calls. Every function returns 0,
 * or -1 with a Python exception set, and synchronises nothing. agrl reads
 * two of them: dltensor_from_py_object fills a DLTensor that views the
 * object (valid while the caller holds the object and does not return to
 * Python), current_work_stream writes the framework's current stream of a
 * device. The other entries are kept as untyped pointers. */
typedef struct DLPackExchangeAPIHeader {
  DLPackVersion version;
  struct DLPackExchangeAPIHeader *prev_api;
} DLPackExchangeAPIHeader;

typedef struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;
  void *managed_tensor_allocator;
  void *managed_tensor_from_py_object_no_sync;
  void *managed_tensor_to_py_object_no_sync;
  int (*dltensor_from_py_object_no_sync)(void *py_object, DLTensor *out);
  int (*current_work_stream)(int32_t device_type, int32_t device_id, void **out_stream);
} DLPackExchangeAPI;

#endif /* AGRL_PY_DLPACK_H */
