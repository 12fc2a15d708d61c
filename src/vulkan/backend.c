/* backend.c — the Vulkan backend's device, memory and transfers.
 *
 * Addresses. Device memory is handed to the core as buffer device
 * addresses (Vulkan 1.2's bufferDeviceAddress): every allocation is a
 * range of a block (one VkDeviceMemory with one VkBuffer over all of it),
 * and the pointer the core holds is the range's address (a multiple of 256
 * bytes), so the core's offsets and views work as on CUDA, and a kernel
 * takes 64-bit addresses in its push constants (GL_EXT_buffer_reference).
 * The backend finds the allocation of an address by a binary search over
 * its allocations (sorted by address), for the copies that take a buffer
 * and an offset.
 *
 * Memory. Blocks of device memory (16 MiB first, doubling to 256 MiB or an
 * eighth of the heap) and of argument memory (2 to 16 MiB) are handed out
 * in ranges, first-fit, released ranges merging with their free neighbours
 * (vk_ranges.c); an allocation above a quarter of the largest block gets a
 * block of its own, freed with it, and a pool keeps one of its blocks left
 * empty, freeing the others. So the state holds few VkDeviceMemory objects, and never more than
 * the device's maxMemoryAllocationCount: past it, once what was released
 * has been waited for and empty blocks freed, an allocation is refused with
 * AG_ERR_OUT_OF_MEMORY and a message that says so.
 *
 * Everything is queued, in order, on the one compute queue: dispatches,
 * zeroings, copies between device buffers and the host transfers' copies
 * go into one of VK_SLOTS command buffers, each after a barrier from the
 * stage of the command before it (compute or transfer) to its own. A slot
 * is submitted (with its fence, not waited for) when it holds
 * VK_SLOT_DISPATCHES commands, or by a download, a sync or a large
 * upload's piece; the next slot fills while it runs, and a slot is reused
 * once its fence has signalled. Submissions are numbered (tickets): the
 * queue runs them in order, so one fence tells that every earlier one ran.
 * A fence is polled briefly before the host sleeps on it.
 *
 * Transfers. Where the whole device-local heap is host-visible (a resizable
 * BAR, as NVIDIA's driver has on a data-centre GPU, or a CPU device), device
 * memory is allocated from that type and mapped, and a small upload
 * (VK_INLINE_UPLOAD) made while nothing is queued or running is written by
 * the host straight into it: nothing is queued and nothing waits; the next
 * submission sees it (the memory is host-coherent). Otherwise a small
 * upload is copied into the slot's host-visible argument memory and queued
 * from there, behind the commands before it; a larger one goes in
 * VK_PIECE pieces through a staging ring of 2 * AG_TRANSFER_PART_BYTES
 * (cached host memory where the device has it), each piece submitted as
 * soon as it is filled and reused once its ticket has run. No upload waits
 * for its copy. A download of such mapped memory, small (VK_INLINE_UPLOAD)
 * or host-cached, is read by the host in place after one wait (for a
 * submission ending in a barrier to the host): no copy is queued. Another
 * download waits for the queue, then copies parts of AG_TRANSFER_PART_BYTES
 * into the ring's two halves, the next part copying while the host drains
 * the last.
 *
 * Kernels are compute pipelines of the shaders in src/vulkan/shaders
 * (compiled to SPIR-V at build time and embedded), their arguments in push
 * constants (addresses and sizes) and, when larger, in an argument block
 * of host-visible memory (ag__vk_args).
 *
 * Recordings are command buffers: between record_begin and record_end the
 * dispatches, zeroings and copies are kept (their argument blocks with
 * them), and record_end encodes them, once, into a command buffer of their
 * own that begins with a barrier from every compute and transfer command
 * before it. A replay submits that command buffer as it is (behind what the
 * current slot holds, in the same submission, under the slot's fence and
 * ticket): the host encodes nothing. It may be submitted again while an
 * earlier replay of it still runs (simultaneous use). A recording holds
 * addresses: it reads and writes the same memory on every replay, and what
 * changes between replays (indices, counters, steps) the kernels read
 * from that memory.
 *
 * Releases are deferred: memory released (or a recording's argument
 * blocks) is freed once the tickets queued before the release have run.
 *
 * Free memory: VK_EXT_memory_budget's heap budget minus usage where the
 * device has the extension; without it, the device-local heap's size less
 * what this state has allocated (an upper bound: other processes' use is
 * not seen).
 *
 * With AGRL_VK_VALIDATION=1 in the environment the Khronos validation
 * layer is enabled (when installed) and its errors are counted
 * over every state of the process (ag__vulkan_validation_total), the last
 * one kept.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vulkan/vulkan.h>

#include "agrl/buffer.h" /* AG_TRANSFER_PART_BYTES */
#include "base/backend.h"
#include "base/base.h"
#include "vulkan/vk_internal.h"

#define VK_ALIGN 256u
#define VK_PUSH_BYTES AG__VK_PUSH_BYTES
#define VK_SLOTS 4                          /* command buffers of queued work */
#define VK_SLOT_DISPATCHES 256              /* commands a slot takes before it is submitted */
#define VK_ARG_CHUNK ((size_t)1 << 18)      /* bytes of a slot's (or recording's) argument blocks */
#define VK_INLINE_UPLOAD ((size_t)64 << 10) /* uploads up to this travel in a slot's argument memory */
#define VK_PIECE ((size_t)2 << 20)          /* a large upload's pieces: filled while the last one copies */
#define VK_PIECES ((int)(2 * AG_TRANSFER_PART_BYTES / VK_PIECE))
#define VK_BLOCK_FIRST ((size_t)16 << 20)    /* a pool's first block of device memory */
#define VK_BLOCK_MAX ((size_t)256 << 20)     /* the largest it grows to */
#define VK_ARG_BLOCK_FIRST ((size_t)2 << 20) /* the same for argument memory */
#define VK_ARG_BLOCK_MAX ((size_t)16 << 20)
#define VK_SPIN_S 50e-6 /* a fence is polled this long before the host sleeps on it (not on CPU devices) */

/* A block of device memory: one VkDeviceMemory, one buffer over all of it
 * (with its device address) and the free ranges that allocations take. */
typedef struct vk_block {
  VkBuffer buf;
  VkDeviceMemory mem;
  unsigned char *map; /* the block seen by the host, where its memory is mapped */
  uint64_t addr;      /* the buffer's device address (0: a staging buffer has none) */
  VkDeviceSize size;
  int kind;             /* BUF_* */
  int own;              /* made for one allocation, freed with it */
  ag__vk_ranges ranges; /* from the first VK_ALIGN-aligned address */
} vk_block;

/* The blocks of one kind of memory; a new one is `next` bytes (doubling up
 * to `max`), and an allocation above `own` bytes gets a block of its own. */
typedef struct vk_pool {
  vk_block **blocks;
  size_t n, cap;
  size_t next, max, own;
} vk_pool;

/* Host-visible memory for argument blocks (a range of a block), with its
 * device address. */
typedef struct vk_chunk {
  VkBuffer buf; /* the block's */
  vk_block *blk;
  VkDeviceSize off; /* in the block */
  unsigned char *map;
  uint64_t addr;
  size_t size, used;
} vk_chunk;

/* A command buffer of queued work. */
typedef struct vk_slot {
  VkCommandBuffer cmd;
  VkFence fence;
  int busy;        /* submitted, its fence not yet waited for */
  int open;        /* begun, taking commands */
  int n;           /* commands in it */
  uint64_t ticket; /* the number of its last submission */
  vk_chunk args;
} vk_slot;

/* A command, as queued or recorded. */
enum { OP_DISPATCH = 0, OP_FILL, OP_COPY };
typedef struct vk_cmd {
  int op, pipe;
  uint32_t groups[3];
  uint32_t push_bytes;
  VkBuffer dst, src;
  VkDeviceSize dst_off, src_off, bytes;
  unsigned char push[AG__VK_PUSH_BYTES];
} vk_cmd;

/* A recording: its commands (kept until record_end encodes them), the
 * command buffer that holds them encoded, and the argument blocks they
 * read. */
typedef struct vk_rec {
  vk_cmd *cmds;
  int n, cap;
  vk_chunk *chunks;
  int n_chunks;
  VkCommandBuffer cmd; /* the commands, encoded; VK_NULL_HANDLE while none */
  int last;            /* the stage of its last command (ST_*) */
  uint64_t ticket;     /* the last submission that runs it (0: none) */
} vk_rec;

/* An allocation: a range of a block. */
typedef struct vk_alloc {
  uint64_t base; /* its device address (a multiple of VK_ALIGN), what the core was given */
  size_t bytes;  /* the range's size */
  uint64_t addr; /* = base */
  size_t len;    /* what the core asked for */
  VkBuffer buf;  /* the block's */
  vk_block *blk;
  VkDeviceSize off;   /* the range's offset in the block */
  unsigned char *map; /* the block seen by the host (NULL: not mapped) */
} vk_alloc;

/* A range released while queued work may still use it: given back to its
 * block once the submission `ticket` has completed. */
typedef struct vk_dead {
  vk_block *blk;
  VkDeviceSize off, bytes;
  uint64_t ticket;
} vk_dead;

/* The stage of the last command queued, for the barrier before the next. */
enum { ST_NONE = 0, ST_COMPUTE, ST_TRANSFER, ST_HOST };

typedef struct vk_state {
  VkInstance inst;
  VkPhysicalDevice phys;
  VkDevice dev;
  VkQueue queue;
  uint32_t qfam;
  VkCommandPool pool;
  uint32_t mem_device, mem_host;
  uint32_t heap_device;
  int device_type_visible; /* a host-visible memory type of the device-local heap, or -1 */
  int visible_cached;      /* that type is host-cached: the host reads it at memory speed */
  int copy_reads;          /* downloads always copied through staging (AGRL_VK_COPY_READS=1, for tests) */
  int has_budget;
  VkBuffer staging;
  VkDeviceMemory staging_mem;
  unsigned char *staging_map;
  uint64_t piece_ticket[VK_PIECES]; /* the submission that copies staging piece i */
  int next_piece;
  vk_alloc *allocs; /* sorted by base */
  size_t n_allocs, cap_allocs;
  size_t allocated; /* bytes of the device-memory blocks held */
  vk_pool pools[2]; /* device memory, argument memory */
  uint32_t n_mem;   /* VkDeviceMemory objects held */
  uint32_t max_mem; /* the most it may hold: maxMemoryAllocationCount (or less, by a test) */
  vk_dead *dead;
  size_t n_dead, cap_dead;
  VkPipelineLayout layout; /* every kernel's: push constants only */
  VkShaderModule mods[AG__VK_N_PIPES];
  VkPipeline pipes[AG__VK_N_PIPES];
  unsigned char pipe_failed[AG__VK_N_PIPES]; /* could not be made on this device */
  vk_slot slots[VK_SLOTS];
  int cur;                       /* the slot that takes the next command */
  uint64_t submitted, completed; /* submissions made, and known to have run */
  int last;                      /* the stage of the last command queued (ST_*) */
  double spin_s;                 /* how long a fence is polled before sleeping */
  vk_rec *rec;                   /* the recording in progress, or NULL */
  int f64;                       /* shaderFloat64 enabled */
  uint64_t encodes;              /* commands encoded into command buffers so far */
} vk_state;

static ag_status vk_fail(VkResult r, const char *what) {
  const ag_status s = r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY
                          ? AG_ERR_OUT_OF_MEMORY
                          : AG_ERR_DEVICE;
  return ag__fail(s, "vulkan: %s failed (VkResult %d)", what, (int)r);
}

/* ---- the instance ---- */

/* Every state's validation errors so far, and the last one's message. */
static int total_errors, total_states_validated;
static char total_last[512];

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                                 VkDebugUtilsMessageTypeFlagsEXT type,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                 void *user) {
  (void)type, (void)user;
  if (sev & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
    __atomic_fetch_add(&total_errors, 1, __ATOMIC_RELAXED);
    snprintf(total_last, sizeof total_last, "%s", data && data->pMessage ? data->pMessage : "?");
  }
  return VK_FALSE;
}

static int validation_wanted(void) {
  const char *e = getenv("AGRL_VK_VALIDATION");
  return e && *e && strcmp(e, "0") != 0;
}

static int layer_present(const char *name) {
  uint32_t n = 0;
  if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0) return 0;
  VkLayerProperties *p = ag__malloc(sizeof *p * n);
  if (!p) return 0;
  int found = 0;
  if (vkEnumerateInstanceLayerProperties(&n, p) == VK_SUCCESS)
    for (uint32_t i = 0; i < n && !found; i++) found = strcmp(p[i].layerName, name) == 0;
  free(p);
  return found;
}

/* The process's one instance of Vulkan 1.2, made at the first call and kept
 * (every state and count uses it: drivers do not all take instances made
 * and destroyed by the thousand), with the validation layer and a messenger
 * counting its errors when AGRL_VK_VALIDATION asks for them as it is made. */
static pthread_mutex_t inst_mu = PTHREAD_MUTEX_INITIALIZER;
static VkInstance g_inst;
static int g_validating;

static ag_status shared_instance(VkInstance *out) {
  pthread_mutex_lock(&inst_mu);
  if (g_inst) {
    *out = g_inst;
    pthread_mutex_unlock(&inst_mu);
    return AG_OK;
  }
  const char *layer = "VK_LAYER_KHRONOS_validation", *ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
  const int validate = validation_wanted() && layer_present(layer);
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "agrl";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  if (validate) {
    ci.enabledLayerCount = 1, ci.ppEnabledLayerNames = &layer;
    ci.enabledExtensionCount = 1, ci.ppEnabledExtensionNames = &ext;
  }
  VkInstance inst;
  VkResult r = vkCreateInstance(&ci, NULL, &inst);
  if (r != VK_SUCCESS) {
    pthread_mutex_unlock(&inst_mu);
    return vk_fail(r, "vkCreateInstance");
  }
  if (validate) {
    PFN_vkCreateDebugUtilsMessengerEXT mk =
        (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(inst, "vkCreateDebugUtilsMessengerEXT");
    VkDebugUtilsMessengerCreateInfoEXT di = {.sType =
                                                 VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    di.messageSeverity =
        VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT;
    di.messageType =
        VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT;
    di.pfnUserCallback = on_message;
    VkDebugUtilsMessengerEXT dbg;
    g_validating = mk && mk(inst, &di, NULL, &dbg) == VK_SUCCESS; /* kept with the instance */
  }
  g_inst = inst;
  *out = inst;
  pthread_mutex_unlock(&inst_mu);
  return AG_OK;
}

/* The compute queue family of d (-1: none). */
static int compute_family(VkPhysicalDevice d) {
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(d, &n, NULL);
  VkQueueFamilyProperties p[32];
  if (n > 32) n = 32;
  vkGetPhysicalDeviceQueueFamilyProperties(d, &n, p);
  for (uint32_t i = 0; i < n; i++)
    if (p[i].queueFlags & VK_QUEUE_COMPUTE_BIT) return (int)i;
  return -1;
}

/* Whether d can be agrl's: Vulkan 1.2, a compute queue, buffer device
 * addresses and 64-bit integers in shaders. */
static int usable(VkPhysicalDevice d) {
  VkPhysicalDeviceProperties p;
  vkGetPhysicalDeviceProperties(d, &p);
  if (p.apiVersion < VK_API_VERSION_1_2 || compute_family(d) < 0) return 0;
  VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f.pNext = &f12;
  vkGetPhysicalDeviceFeatures2(d, &f);
  return f12.bufferDeviceAddress == VK_TRUE && f.features.shaderInt64 == VK_TRUE;
}

/* The usable devices of inst, at most max, in the loader's order. */
static uint32_t usable_devices(VkInstance inst, VkPhysicalDevice *out, uint32_t max) {
  uint32_t n = 0;
  if (vkEnumeratePhysicalDevices(inst, &n, NULL) != VK_SUCCESS || n == 0) return 0;
  VkPhysicalDevice all[16];
  if (n > 16) n = 16;
  if (vkEnumeratePhysicalDevices(inst, &n, all) < 0) return 0;
  uint32_t k = 0;
  for (uint32_t i = 0; i < n; i++)
    if (usable(all[i]) && k < max) out[k++] = all[i];
  return k;
}

int ag__vulkan_device_count(void) {
  VkInstance inst;
  ag_status s = shared_instance(&inst);
  if (s) {
    ag__fail(AG_OK, "%s", ""); /* no loader or driver: no device, and no error left behind */
    return 0;
  }
  VkPhysicalDevice d[16];
  return (int)usable_devices(inst, d, 16);
}

/* ---- memory types ---- */

static int mem_type(const vk_state *s, uint32_t bits, VkMemoryPropertyFlags want) {
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(s->phys, &mp);
  for (uint32_t i = 0; i < mp.memoryTypeCount; i++)
    if ((bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) return (int)i;
  return -1;
}

/* The kinds of buffer: device-local storage; host-visible staging (cached
 * where the device has such memory); host-visible argument blocks read by
 * shaders (device-local where the device has such memory the host can
 * write). */
enum { BUF_DEVICE = 0, BUF_STAGING, BUF_ARGS };

/* A buffer of `bytes` of kind `kind` over memory of its own, for storage
 * and transfers (the storage kinds with device addresses): one more of the
 * max_mem VkDeviceMemory objects, refused past them. */
static ag_status make_buffer(vk_state *s, size_t bytes, int kind, VkBuffer *buf, VkDeviceMemory *mem,
                             int *mappable) {
  const int host = kind != BUF_DEVICE, addressed = kind != BUF_STAGING;
  if (s->n_mem >= s->max_mem)
    return ag__fail(AG_ERR_OUT_OF_MEMORY,
                    "vulkan: %zu bytes need another block of device memory, and all %u memory objects the "
                    "device allows (maxMemoryAllocationCount) are in use",
                    bytes, s->max_mem);
  VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = bytes;
  bi.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  if (addressed) bi.usage |= VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkResult r = vkCreateBuffer(s->dev, &bi, NULL, buf);
  if (r != VK_SUCCESS) return vk_fail(r, "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(s->dev, *buf, &req);
  const VkMemoryPropertyFlags visible =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int type = -1;
  if (mappable) *mappable = 0;
  /* device memory the host can write too, where the whole device-local heap
   * is host-visible (a resizable BAR, a CPU device): small uploads then go
   * straight into it (vk_upload) */
  if (kind == BUF_DEVICE && s->device_type_visible >= 0 &&
      (req.memoryTypeBits >> s->device_type_visible & 1u)) {
    type = s->device_type_visible;
    if (mappable) *mappable = 1;
  }
  if (kind == BUF_ARGS) type = mem_type(s, req.memoryTypeBits, visible | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  /* staging is read back by the host too: cached memory, where there is some */
  if (kind == BUF_STAGING)
    type = mem_type(s, req.memoryTypeBits, visible | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  if (type < 0) type = mem_type(s, req.memoryTypeBits, host ? visible : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (type < 0) {
    vkDestroyBuffer(s->dev, *buf, NULL);
    return ag__fail(AG_ERR_DEVICE, "vulkan: no %s memory type for a buffer",
                    host ? "host-visible" : "device-local");
  }
  VkMemoryAllocateFlagsInfo fi = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
  fi.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.pNext = addressed ? &fi : NULL;
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = (uint32_t)type;
  r = vkAllocateMemory(s->dev, &ai, NULL, mem);
  if (r == VK_SUCCESS) r = vkBindBufferMemory(s->dev, *buf, *mem, 0);
  if (r != VK_SUCCESS) {
    if (*mem) vkFreeMemory(s->dev, *mem, NULL);
    vkDestroyBuffer(s->dev, *buf, NULL);
    *mem = VK_NULL_HANDLE;
    return vk_fail(r, "vkAllocateMemory");
  }
  s->n_mem++;
  return AG_OK;
}

/* Frees what make_buffer made. */
static void free_buffer(vk_state *s, VkBuffer buf, VkDeviceMemory mem) {
  if (buf) vkDestroyBuffer(s->dev, buf, NULL);
  if (mem) {
    vkFreeMemory(s->dev, mem, NULL);
    s->n_mem--;
  }
}

/* ---- blocks: device memory suballocated ----
 *
 * Allocations and argument chunks are ranges of blocks, so that a process
 * holds few VkDeviceMemory objects (a device may allow as few as 4,096,
 * maxMemoryAllocationCount). Each block is one buffer bound to all of its
 * memory, so a range's device address is the block's plus its offset, and
 * copies name the block's buffer at that offset. Ranges start at multiples
 * of VK_ALIGN bytes of address (the core's alignment). Only buffers are
 * made, so bufferImageGranularity does not apply. */

static void block_free(vk_state *s, vk_block *b) {
  if (b->map) vkUnmapMemory(s->dev, b->mem);
  free_buffer(s, b->buf, b->mem);
  if (b->kind == BUF_DEVICE) s->allocated -= (size_t)b->size;
  ag__vk_ranges_free(&b->ranges);
  free(b);
}

/* A block of `size` bytes of kind BUF_DEVICE or BUF_ARGS, mapped where the
 * host can see it, in pool p. */
static ag_status block_new(vk_state *s, vk_pool *p, int kind, size_t size, int own, vk_block **out) {
  if (p->n == p->cap) {
    const size_t cap = p->cap ? 2 * p->cap : 8;
    vk_block **m = ag__realloc(p->blocks, cap * sizeof *m);
    if (!m) return ag__fail(AG_ERR_OUT_OF_MEMORY, "vulkan: out of host memory");
    p->blocks = m, p->cap = cap;
  }
  vk_block *b = ag__calloc(1, sizeof *b);
  if (!b) return ag__fail(AG_ERR_OUT_OF_MEMORY, "vulkan: out of host memory");
  int mappable = kind == BUF_ARGS;
  ag_status st = make_buffer(s, size, kind, &b->buf, &b->mem, kind == BUF_DEVICE ? &mappable : NULL);
  if (st) {
    free(b);
    return st;
  }
  b->kind = kind, b->own = own, b->size = size;
  if (kind == BUF_DEVICE) s->allocated += size;
  void *map = NULL;
  VkResult r = VK_SUCCESS;
  if (mappable) r = vkMapMemory(s->dev, b->mem, 0, VK_WHOLE_SIZE, 0, &map);
  if (r == VK_SUCCESS) {
    b->map = map; /* device memory not mapped: its uploads are queued */
  } else if (kind == BUF_ARGS) {
    block_free(s, b);
    return vk_fail(r, "vkMapMemory (arguments)");
  }
  VkBufferDeviceAddressInfo ai = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
  ai.buffer = b->buf;
  b->addr = vkGetBufferDeviceAddress(s->dev, &ai);
  const uint64_t lead = ((b->addr + VK_ALIGN - 1) & ~(uint64_t)(VK_ALIGN - 1)) - b->addr;
  if ((st = ag__vk_ranges_init(&b->ranges, lead, lead < size ? size - lead : 0))) {
    block_free(s, b);
    return st;
  }
  p->blocks[p->n++] = b;
  *out = b;
  return AG_OK;
}

static ag_status drain_all(vk_state *s);
static void bury(vk_state *s);

/* Frees pool p's blocks that hold nothing, but for one (`keep`: that one
 * too); its blocks may move. */
static void pool_trim(vk_state *s, vk_pool *p, int keep) {
  size_t kept = 0;
  for (size_t i = 0; i < p->n; i++) {
    vk_block *b = p->blocks[i];
    if (b->ranges.taken == 0 && (b->own || !keep)) {
      block_free(s, b);
    } else {
      if (b->ranges.taken == 0) keep = 0; /* the one empty block kept */
      p->blocks[kept++] = b;
    }
  }
  p->n = kept;
}

/* `bytes` of pool p's memory: *b's range from *off, of *len bytes (bytes
 * rounded up to VK_ALIGN). At the memory-object limit, memory released
 * before is waited for and empty blocks are freed before it is refused. */
static ag_status pool_take(vk_state *s, vk_pool *p, int kind, size_t bytes, vk_block **b, VkDeviceSize *off,
                           size_t *len) {
  if (bytes > SIZE_MAX - 2 * VK_ALIGN)
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "vulkan: %zu bytes of device memory asked for", bytes);
  const size_t need = bytes ? (bytes + VK_ALIGN - 1) & ~(size_t)(VK_ALIGN - 1) : VK_ALIGN;
  *len = need;
  if (need > p->own) { /* a block of its own (room to align its start) */
    if (s->n_mem >= s->max_mem) {
      if (s->n_dead && drain_all(s) == AG_OK) bury(s);
      for (size_t i = 0; i < 2; i++) pool_trim(s, &s->pools[i], 0);
    }
    ag_status st = block_new(s, p, kind, need + VK_ALIGN, 1, b);
    /* the first range of a block: room in it, and in its list (see vk_ranges.c) */
    return st ? st : ag__vk_ranges_take(&(*b)->ranges, need, VK_ALIGN, off);
  }
  for (int round = 0; round < 2; round++) {
    for (size_t i = 0; i < p->n; i++) {
      vk_block *k = p->blocks[i];
      if (k->own) continue;
      ag_status st = ag__vk_ranges_take(&k->ranges, need, VK_ALIGN, off);
      if (st == AG_OK) {
        *b = k;
        return AG_OK;
      }
      if (st != AG_ERR_OUT_OF_RANGE) return st; /* out of host memory */
    }
    if (s->n_mem < s->max_mem || round) break;
    /* at the limit: the memory released so far, once it is free, may hold them */
    if (s->n_dead && drain_all(s) == AG_OK) bury(s);
    for (size_t i = 0; i < 2; i++) pool_trim(s, &s->pools[i], 0);
  }
  size_t size = p->next;
  while (size < need + VK_ALIGN) size *= 2;
  ag_status st;
  for (;;) { /* a new block, smaller ones when the device has no room for it */
    st = block_new(s, p, kind, size, 0, b);
    if (st != AG_ERR_OUT_OF_MEMORY || s->n_mem >= s->max_mem || size / 2 < need + VK_ALIGN) break;
    size /= 2;
  }
  if (st) return st;
  if (p->next < p->max) p->next = 2 * size < p->max ? 2 * size : p->max;
  return ag__vk_ranges_take(&(*b)->ranges, need, VK_ALIGN, off);
}

/* Gives back a range of block b; a block left empty is freed if it was its
 * allocation's own or its pool keeps another empty one. */
static void pool_give(vk_state *s, vk_block *b, VkDeviceSize off, VkDeviceSize bytes) {
  ag__vk_ranges_give(&b->ranges, off, bytes);
  if (b->ranges.taken) return;
  vk_pool *p = &s->pools[b->kind == BUF_ARGS];
  if (b->own) {
    for (size_t i = 0; i < p->n; i++)
      if (p->blocks[i] == b) {
        p->blocks[i] = p->blocks[--p->n];
        break;
      }
    block_free(s, b);
    return;
  }
  pool_trim(s, p, 1);
}

/* ---- argument blocks ---- */

static ag_status make_chunk(vk_state *s, size_t size, vk_chunk *c) {
  memset(c, 0, sizeof *c);
  vk_block *b;
  VkDeviceSize off;
  size_t len;
  ag_status st = pool_take(s, &s->pools[1], BUF_ARGS, size, &b, &off, &len);
  if (st) return st;
  c->buf = b->buf, c->blk = b, c->off = off;
  c->map = b->map + off;
  c->addr = b->addr + off;
  c->size = len;
  return AG_OK;
}

/* ---- opening and closing ---- */

static void vk_close(void *p) {
  vk_state *s = p;
  if (!s) return;
  if (s->dev) {
    vkDeviceWaitIdle(s->dev);
    for (int i = 0; i < VK_SLOTS; i++)
      if (s->slots[i].fence) vkDestroyFence(s->dev, s->slots[i].fence, NULL);
    for (int i = 0; i < 2; i++) /* every allocation's, chunk's and released range's block */
      for (size_t j = 0; j < s->pools[i].n; j++) block_free(s, s->pools[i].blocks[j]);
    if (s->staging_map) vkUnmapMemory(s->dev, s->staging_mem);
    free_buffer(s, s->staging, s->staging_mem);
    for (int i = 0; i < AG__VK_N_PIPES; i++) {
      if (s->pipes[i]) vkDestroyPipeline(s->dev, s->pipes[i], NULL);
      if (s->mods[i]) vkDestroyShaderModule(s->dev, s->mods[i], NULL);
    }
    if (s->layout) vkDestroyPipelineLayout(s->dev, s->layout, NULL);
    if (s->pool) vkDestroyCommandPool(s->dev, s->pool, NULL);
    vkDestroyDevice(s->dev, NULL);
  }
  for (int i = 0; i < 2; i++) free(s->pools[i].blocks);
  free(s->allocs);
  free(s->dead);
  free(s);
}

static int has_extension(VkPhysicalDevice d, const char *name) {
  uint32_t n = 0;
  if (vkEnumerateDeviceExtensionProperties(d, NULL, &n, NULL) != VK_SUCCESS || n == 0) return 0;
  VkExtensionProperties *e = ag__malloc(sizeof *e * n);
  if (!e) return 0;
  int found = 0;
  if (vkEnumerateDeviceExtensionProperties(d, NULL, &n, e) == VK_SUCCESS)
    for (uint32_t i = 0; i < n && !found; i++) found = strcmp(e[i].extensionName, name) == 0;
  free(e);
  return found;
}

/* Whether SPIR-V module `spv` declares the Float64 capability (its
 * OpCapability instructions come first, after the 5-word header). */
static int needs_f64(const unsigned char *spv, size_t bytes) {
  const size_t n = bytes / 4;
  for (size_t i = 5; i + 1 < n;) {
    uint32_t w, cap;
    memcpy(&w, spv + 4 * i, 4);
    const uint32_t op = w & 0xffffu, len = w >> 16;
    if (op != 17 /* OpCapability */ || len < 2) break;
    memcpy(&cap, spv + 4 * (i + 1), 4);
    if (cap == 10 /* Float64 */) return 1;
    i += len;
  }
  return 0;
}

/* The pipeline layout every kernel shares: push constants only. The
 * pipelines themselves are made at a shader's first use (ag__vk_pipe), so
 * that a context compiles only the shaders it runs. */
static ag_status make_layout(vk_state *s) {
  VkPushConstantRange pr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, VK_PUSH_BYTES};
  VkPipelineLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  li.pushConstantRangeCount = 1;
  li.pPushConstantRanges = &pr;
  VkResult r = vkCreatePipelineLayout(s->dev, &li, NULL, &s->layout);
  return r == VK_SUCCESS ? AG_OK : vk_fail(r, "vkCreatePipelineLayout");
}

/* Shader i's pipeline, made now if it is not yet (none for a shader of
 * doubles on a device without shaderFloat64: its kernels say unsupported). */
static int make_pipeline(vk_state *s, int i) {
  if (s->pipes[i]) return 1;
  if (s->pipe_failed[i]) return 0;
  const ag__vk_shader *sh = &ag__vk_shaders[i];
  s->pipe_failed[i] = 1;
  if (!s->f64 && needs_f64(sh->spv, sh->bytes)) return 0;
  VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  mi.codeSize = sh->bytes;
  mi.pCode = (const uint32_t *)(const void *)sh->spv;
  if (vkCreateShaderModule(s->dev, &mi, NULL, &s->mods[i]) != VK_SUCCESS) {
    s->mods[i] = VK_NULL_HANDLE;
    return 0;
  }
  VkComputePipelineCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = s->mods[i];
  ci.stage.pName = "main";
  ci.layout = s->layout;
  if (vkCreateComputePipelines(s->dev, VK_NULL_HANDLE, 1, &ci, NULL, &s->pipes[i]) != VK_SUCCESS) {
    s->pipes[i] = VK_NULL_HANDLE;
    return 0;
  }
  s->pipe_failed[i] = 0;
  return 1;
}

static ag_status vk_open(int index, void **out, char *desc, size_t desc_len) {
  vk_state *s = ag__calloc(1, sizeof *s);
  if (!s) return ag__fail(AG_ERR_OUT_OF_MEMORY, "vulkan: out of host memory");
  ag_status st = shared_instance(&s->inst);
  if (!st && g_validating) __atomic_fetch_add(&total_states_validated, 1, __ATOMIC_RELAXED);
  VkPhysicalDevice d[16];
  const uint32_t n = st ? 0 : usable_devices(s->inst, d, 16);
  if (!st && (index < 0 || (uint32_t)index >= n))
    st = ag__fail(AG_ERR_INVALID_ARG,
                  "vulkan: device %d requested, %u usable (Vulkan 1.2, compute, buffer addresses)", index, n);
  if (st) {
    vk_close(s);
    return st;
  }
  s->phys = d[index];
  s->qfam = (uint32_t)compute_family(s->phys);
  s->has_budget = has_extension(s->phys, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  const float prio = 1.0f;
  VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qi.queueFamilyIndex = s->qfam;
  qi.queueCount = 1;
  qi.pQueuePriorities = &prio;
  VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  f12.bufferDeviceAddress = VK_TRUE;
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f2.pNext = &f12;
  f2.features.shaderInt64 = VK_TRUE;
  {
    VkPhysicalDeviceFeatures have;
    vkGetPhysicalDeviceFeatures(s->phys, &have);
    /* AGRL_VK_NO_F64=1: as a device without 64-bit floats (the refusals' tests) */
    const char *no = getenv("AGRL_VK_NO_F64");
    s->f64 = have.shaderFloat64 == VK_TRUE && !(no && *no && strcmp(no, "0") != 0);
    /* AGRL_VK_COPY_READS=1: every download copied through staging (that path's tests, on a device
     * whose memory the host reads in place) */
    const char *copy = getenv("AGRL_VK_COPY_READS");
    s->copy_reads = copy && *copy && strcmp(copy, "0") != 0;
    f2.features.shaderFloat64 = s->f64 ? VK_TRUE : VK_FALSE;
  }
  VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  di.pNext = &f2;
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  const char *budget = VK_EXT_MEMORY_BUDGET_EXTENSION_NAME;
  if (s->has_budget) di.enabledExtensionCount = 1, di.ppEnabledExtensionNames = &budget;
  VkResult r = vkCreateDevice(s->phys, &di, NULL, &s->dev);
  if (r != VK_SUCCESS) {
    s->dev = VK_NULL_HANDLE;
    vk_close(s);
    return vk_fail(r, "vkCreateDevice");
  }
  vkGetDeviceQueue(s->dev, s->qfam, 0, &s->queue);
  {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(s->phys, &p);
    s->max_mem = p.limits.maxMemoryAllocationCount;
  }
  VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = s->qfam;
  r = vkCreateCommandPool(s->dev, &pi, NULL, &s->pool);
  VkCommandBufferAllocateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ci.commandPool = s->pool;
  ci.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  for (int i = 0; i < VK_SLOTS && r == VK_SUCCESS; i++) {
    ci.commandBufferCount = 1;
    r = vkAllocateCommandBuffers(s->dev, &ci, &s->slots[i].cmd);
    if (r == VK_SUCCESS) r = vkCreateFence(s->dev, &fi, NULL, &s->slots[i].fence);
  }
  if (r != VK_SUCCESS) {
    vk_close(s);
    return vk_fail(r, "creating the command pool and fences");
  }
  if ((st = make_layout(s))) {
    vk_close(s);
    return st;
  }
  /* the memory types and the staging parts */
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(s->phys, &mp);
  for (uint32_t i = 0; i < mp.memoryTypeCount; i++)
    if (mp.memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) {
      s->heap_device = mp.memoryTypes[i].heapIndex;
      break;
    }
  s->device_type_visible = -1;
  {
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                       VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                       VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    for (uint32_t i = 0; i < mp.memoryTypeCount && s->device_type_visible < 0; i++)
      if ((mp.memoryTypes[i].propertyFlags & want) == want && mp.memoryTypes[i].heapIndex == s->heap_device)
        s->device_type_visible = (int)i,
        s->visible_cached = (mp.memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) != 0;
  }
  /* blocks: up to an eighth of the heap (device memory), or of the 256 MiB a
   * host-visible device-local heap may be (argument memory) */
  {
    size_t top = VK_BLOCK_MAX;
    while (top > VK_BLOCK_FIRST && top > mp.memoryHeaps[s->heap_device].size / 8) top /= 2;
    s->pools[0] = (vk_pool){.next = VK_BLOCK_FIRST, .max = top, .own = top / 4};
    s->pools[1] = (vk_pool){.next = VK_ARG_BLOCK_FIRST, .max = VK_ARG_BLOCK_MAX, .own = VK_ARG_BLOCK_MAX / 4};
  }
  for (int i = 0; i < VK_SLOTS && !st; i++) st = make_chunk(s, VK_ARG_CHUNK, &s->slots[i].args);
  if (st) {
    vk_close(s);
    return st;
  }
  if ((st = make_buffer(s, 2 * (size_t)AG_TRANSFER_PART_BYTES, BUF_STAGING, &s->staging, &s->staging_mem,
                        NULL))) { /* a block of its own */
    s->staging = VK_NULL_HANDLE, s->staging_mem = VK_NULL_HANDLE;
    vk_close(s);
    return st;
  }
  void *map = NULL;
  r = vkMapMemory(s->dev, s->staging_mem, 0, VK_WHOLE_SIZE, 0, &map);
  if (r != VK_SUCCESS) {
    vk_close(s);
    return vk_fail(r, "vkMapMemory (staging)");
  }
  s->staging_map = map;
  VkPhysicalDeviceProperties p;
  vkGetPhysicalDeviceProperties(s->phys, &p);
  snprintf(desc, desc_len, "vulkan:%d (%s)", index, p.deviceName);
  /* a software device runs on the host's cores: polling would take them */
  s->spin_s = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? 0.0 : VK_SPIN_S;
  *out = s;
  return AG_OK;
}

static ag_status vk_mem_info(void *p, size_t *free_bytes, size_t *total_bytes) {
  vk_state *s = p;
  VkPhysicalDeviceMemoryBudgetPropertiesEXT b = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
  VkPhysicalDeviceMemoryProperties2 mp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
  if (s->has_budget) mp.pNext = &b;
  vkGetPhysicalDeviceMemoryProperties2(s->phys, &mp);
  const size_t total = (size_t)mp.memoryProperties.memoryHeaps[s->heap_device].size;
  size_t free_now;
  if (s->has_budget) {
    const uint64_t bud = b.heapBudget[s->heap_device], use = b.heapUsage[s->heap_device];
    free_now = bud > use ? (size_t)(bud - use) : 0;
  } else {
    free_now = total > s->allocated ? total - s->allocated : 0;
  }
  *free_bytes = free_now;
  *total_bytes = total;
  return AG_OK;
}

/* ---- allocations ---- */

/* The allocation holding address a (NULL: none). */
static const vk_alloc *find(const vk_state *s, uint64_t a) {
  size_t lo = 0, hi = s->n_allocs;
  while (lo < hi) { /* the first allocation whose base is above a */
    const size_t mid = lo + (hi - lo) / 2;
    if (s->allocs[mid].base <= a)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0) return NULL;
  const vk_alloc *x = &s->allocs[lo - 1];
  return a < x->base + x->bytes ? x : NULL;
}

/* A range of a device-memory block (see pool_take). */
static ag_status vk_alloc_mem(void *p, size_t bytes, void **out) {
  vk_state *s = p;
  if (s->n_allocs == s->cap_allocs) {
    const size_t cap = s->cap_allocs ? 2 * s->cap_allocs : 64;
    vk_alloc *a = ag__realloc(s->allocs, cap * sizeof *a);
    if (!a) return ag__fail(AG_ERR_OUT_OF_MEMORY, "vulkan: out of host memory");
    s->allocs = a, s->cap_allocs = cap;
  }
  vk_alloc x = {.len = bytes};
  ag_status st = pool_take(s, &s->pools[0], BUF_DEVICE, bytes, &x.blk, &x.off, &x.bytes);
  if (st) return st;
  x.buf = x.blk->buf, x.map = x.blk->map;
  x.base = x.addr = x.blk->addr + x.off;
  size_t lo = 0, hi = s->n_allocs;
  while (lo < hi) { /* the first allocation above it */
    const size_t mid = lo + (hi - lo) / 2;
    if (s->allocs[mid].base < x.base)
      lo = mid + 1;
    else
      hi = mid;
  }
  memmove(&s->allocs[lo + 1], &s->allocs[lo], (s->n_allocs - lo) * sizeof *s->allocs);
  s->allocs[lo] = x;
  s->n_allocs++;
  *out = (void *)(uintptr_t)x.addr;
  return AG_OK;
}

uint32_t ag__vulkan_memory_objects(void *p, uint32_t limit) {
  vk_state *s = p;
  if (limit) {
    VkPhysicalDeviceProperties d;
    vkGetPhysicalDeviceProperties(s->phys, &d);
    s->max_mem = limit < d.limits.maxMemoryAllocationCount ? limit : d.limits.maxMemoryAllocationCount;
  }
  return s->n_mem;
}

/* The allocation, buffer and offset of [a, a + bytes), which must lie in
 * one allocation. */
static ag_status locate_in(const vk_state *s, uint64_t a, size_t bytes, const vk_alloc **in, VkBuffer *buf,
                           VkDeviceSize *off) {
  const vk_alloc *x = find(s, a);
  if (!x || a < x->addr || bytes > x->len || a - x->addr > x->len - bytes)
    return ag__fail(AG_ERR_INVALID_ARG, "vulkan: %zu bytes at 0x%llx are not inside one allocation", bytes,
                    (unsigned long long)a);
  *in = x;
  *buf = x->buf;
  *off = x->off + (a - x->base);
  return AG_OK;
}

static ag_status locate(const vk_state *s, uint64_t a, size_t bytes, VkBuffer *buf, VkDeviceSize *off) {
  const vk_alloc *x;
  return locate_in(s, a, bytes, &x, buf, off);
}

/* ---- submissions ---- */

/* A barrier between a command of stage `from` and the next, of stage `to`:
 * the first completes, and its writes are seen, before the next starts.
 * Every command has one before it, so each barrier also orders all the
 * commands before (execution dependencies chain through the stage that the
 * two barriers share). None at the very start: nothing is queued before. */
static void barrier(VkCommandBuffer c, int from, int to) {
  static const VkPipelineStageFlags stage[] = {0, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                               VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT};
  static const VkAccessFlags wrote[] = {0, VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, 0};
  static const VkAccessFlags uses[] = {0, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
                                       VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                                       VK_ACCESS_HOST_READ_BIT};
  if (from == ST_NONE) return;
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = wrote[from];
  mb.dstAccessMask = uses[to];
  vkCmdPipelineBarrier(c, stage[from], stage[to], 0, 1, &mb, 0, NULL, 0, NULL);
}

/* Frees the released memory whose last user has run. */
static void bury(vk_state *s) {
  size_t kept = 0;
  for (size_t i = 0; i < s->n_dead; i++) {
    vk_dead *d = &s->dead[i];
    if (d->ticket > s->completed) {
      s->dead[kept++] = *d;
      continue;
    }
    pool_give(s, d->blk, d->off, d->bytes);
  }
  s->n_dead = kept;
}

/* Waits for slot k's submission, if it is in flight. A fence is polled for
 * spin_s first: sleeping on it costs tens of microseconds to wake. */
static ag_status settle(vk_state *s, vk_slot *k) {
  if (!k->busy) return AG_OK;
  VkResult r = vkGetFenceStatus(s->dev, k->fence);
  if (r == VK_NOT_READY && s->spin_s > 0) {
    const double until = ag__mono_s() + s->spin_s;
    while (r == VK_NOT_READY && ag__mono_s() < until) r = vkGetFenceStatus(s->dev, k->fence);
  }
  if (r == VK_NOT_READY) r = vkWaitForFences(s->dev, 1, &k->fence, VK_TRUE, UINT64_MAX);
  if (r == VK_SUCCESS) r = vkResetFences(s->dev, 1, &k->fence);
  if (r != VK_SUCCESS) return vk_fail(r, "waiting for the queue");
  k->busy = 0;
  if (k->ticket > s->completed) s->completed = k->ticket; /* the queue runs in order */
  bury(s);
  return AG_OK;
}

/* Waits until submission t has run. */
static ag_status await(vk_state *s, uint64_t t) {
  if (t <= s->completed) return AG_OK;
  vk_slot *k = &s->slots[(t - 1) % VK_SLOTS]; /* tickets go round the slots in turn */
  return k->busy && k->ticket == t ? settle(s, k) : AG_OK;
}

/* Whether nothing is queued and every submission has run (the last one's
 * fence is looked at, not waited for). */
static int queue_idle(vk_state *s) {
  const vk_slot *o = &s->slots[s->cur];
  if (o->open && o->n) return 0;
  if (s->completed == s->submitted) return 1;
  vk_slot *k = &s->slots[(s->submitted - 1) % VK_SLOTS];
  if (!k->busy || k->ticket != s->submitted || vkGetFenceStatus(s->dev, k->fence) != VK_SUCCESS) return 0;
  return settle(s, k) == AG_OK && s->completed == s->submitted;
}

/* The current slot, begun (after its last submission has run). */
static ag_status slot_open(vk_state *s, vk_slot **out) {
  vk_slot *k = &s->slots[s->cur];
  if (!k->open) {
    ag_status st = settle(s, k);
    if (st) return st;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    VkResult r = vkResetCommandBuffer(k->cmd, 0);
    if (r == VK_SUCCESS) r = vkBeginCommandBuffer(k->cmd, &bi);
    if (r != VK_SUCCESS) return vk_fail(r, "vkBeginCommandBuffer");
    k->open = 1, k->n = 0, k->args.used = 0;
  }
  *out = k;
  return AG_OK;
}

/* The ticket the current slot's commands run under: its submission's. */
static uint64_t open_ticket(const vk_state *s) {
  return s->slots[s->cur].open ? s->submitted + 1 : s->submitted;
}

/* Submits the current slot's commands followed by command buffer `then`
 * (VK_NULL_HANDLE: none), not waiting, under the slot's fence and the next
 * ticket, and moves to the next slot. Nothing to submit: nothing done. */
static ag_status submit(vk_state *s, VkCommandBuffer then) {
  vk_slot *k = &s->slots[s->cur];
  if (!k->open && !then) return AG_OK;
  VkCommandBuffer cmds[2];
  uint32_t n = 0;
  VkResult r = VK_SUCCESS;
  if (k->open) {
    k->open = 0;
    r = vkEndCommandBuffer(k->cmd);
    cmds[n++] = k->cmd;
  } else {
    ag_status st = settle(s, k); /* its fence is taken again */
    if (st) return st;
  }
  if (then) cmds[n++] = then;
  s->cur = (s->cur + 1) % VK_SLOTS;
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = n;
  si.pCommandBuffers = cmds;
  if (r == VK_SUCCESS) r = vkQueueSubmit(s->queue, 1, &si, k->fence);
  if (r != VK_SUCCESS) return vk_fail(r, "vkQueueSubmit");
  k->busy = 1;
  k->ticket = ++s->submitted;
  return AG_OK;
}

/* Submits the current slot's commands (not waiting) and moves to the next slot. */
static ag_status flush(vk_state *s) { return submit(s, VK_NULL_HANDLE); }

/* Encodes command x into c, after the barrier it needs behind a command
 * of stage *last (which becomes x's). */
static void encode(vk_state *s, VkCommandBuffer c, const vk_cmd *x, int *last) {
  const int stage = x->op == OP_DISPATCH ? ST_COMPUTE : ST_TRANSFER;
  barrier(c, *last, stage);
  *last = stage;
  s->encodes++;
  switch (x->op) {
    case OP_DISPATCH:
      vkCmdBindPipeline(c, VK_PIPELINE_BIND_POINT_COMPUTE, s->pipes[x->pipe]);
      if (x->push_bytes)
        vkCmdPushConstants(c, s->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, x->push_bytes, x->push);
      vkCmdDispatch(c, x->groups[0], x->groups[1], x->groups[2]);
      break;
    case OP_FILL: vkCmdFillBuffer(c, x->dst, x->dst_off, x->bytes, 0); break;
    default: {
      VkBufferCopy r = {x->src_off, x->dst_off, x->bytes};
      vkCmdCopyBuffer(c, x->src, x->dst, 1, &r);
    }
  }
}

/* Queues command x into the current slot (a full slot is submitted). */
static ag_status queue_cmd(vk_state *s, const vk_cmd *x) {
  vk_slot *k = NULL; /* set by slot_open on success (gcc 12 cannot see it through vk_fail) */
  ag_status st = slot_open(s, &k);
  if (st) return st;
  encode(s, k->cmd, x, &s->last);
  return ++k->n >= VK_SLOT_DISPATCHES ? flush(s) : AG_OK;
}

/* Records command x into the recording in progress, or queues it. */
static ag_status emit(vk_state *s, const vk_cmd *x) {
  vk_rec *r = s->rec;
  if (!r) return queue_cmd(s, x);
  if (r->n == r->cap) {
    const int cap = r->cap ? 2 * r->cap : 16;
    vk_cmd *m = ag__realloc(r->cmds, (size_t)cap * sizeof *m);
    if (!m) return ag__fail(AG_ERR_OUT_OF_MEMORY, "vulkan: out of host memory");
    r->cmds = m, r->cap = cap;
  }
  r->cmds[r->n++] = *x;
  return AG_OK;
}

/* Submits what is queued and waits for all of it. */
static ag_status drain_all(vk_state *s) {
  ag_status st = flush(s);
  for (int i = 0; i < VK_SLOTS && !st; i++) st = settle(s, &s->slots[i]);
  return st;
}

static ag_status vk_sync(void *p) { return drain_all(p); }

/* Keeps a range of block b until the work queued so far has run. */
static void entomb(vk_state *s, vk_block *b, VkDeviceSize off, VkDeviceSize bytes) {
  const uint64_t t = open_ticket(s);
  if (t > s->completed && s->n_dead == s->cap_dead) {
    const size_t cap = s->cap_dead ? 2 * s->cap_dead : 16;
    vk_dead *m = ag__realloc(s->dead, cap * sizeof *m);
    if (m) s->dead = m, s->cap_dead = cap;
  }
  if (t > s->completed && s->n_dead < s->cap_dead) {
    s->dead[s->n_dead++] = (vk_dead){b, off, bytes, t};
    return;
  }
  /* nothing in flight uses it, or no room to keep it: free it after the queue */
  if (t > s->completed && drain_all(s)) vkDeviceWaitIdle(s->dev);
  pool_give(s, b, off, bytes);
}

static void vk_release(void *p, void *ptr) {
  vk_state *s = p;
  if (!ptr) return;
  const vk_alloc *x = find(s, (uint64_t)(uintptr_t)ptr);
  if (!x) return;
  const vk_alloc gone = *x;
  const size_t at = (size_t)(x - s->allocs);
  memmove(&s->allocs[at], &s->allocs[at + 1], (s->n_allocs - at - 1) * sizeof *s->allocs);
  s->n_allocs--;
  entomb(s, gone.blk, gone.off, gone.bytes);
}

static ag_status vk_zero(void *p, void *dst, size_t bytes) {
  vk_state *s = p;
  if (!bytes) return AG_OK;
  vk_cmd x = {.op = OP_FILL, .bytes = bytes};
  ag_status st = locate(s, (uint64_t)(uintptr_t)dst, bytes, &x.dst, &x.dst_off);
  if (st) return st;
  if (x.dst_off % 4 || bytes % 4) { /* fill takes whole words: a shader clears the bytes */
    const uint64_t a = (uint64_t)(uintptr_t)dst;
    ag__vk_pc_zero pc = {a & ~(uint64_t)3, a & 3, (a & 3) + bytes};
    const int64_t words = (int64_t)((pc.end + 3) / 4);
    return ag__vk_dispatch(s, ag__vk_pipe(s, AG__VK_PIPE_ZERO), &pc, sizeof pc, ag__vk_groups(words, 256), 1,
                           1);
  }
  return emit(s, &x);
}

static ag_status vk_copy(void *p, void *dst, const void *src, size_t bytes) {
  vk_state *s = p;
  if (!bytes) return AG_OK;
  vk_cmd x = {.op = OP_COPY, .bytes = bytes};
  ag_status st = locate(s, (uint64_t)(uintptr_t)dst, bytes, &x.dst, &x.dst_off);
  if (!st) st = locate(s, (uint64_t)(uintptr_t)src, bytes, &x.src, &x.src_off);
  return st ? st : emit(s, &x);
}

/* `need` bytes (a multiple of 16) of the current slot's argument memory:
 * the next slot's when the current one's is full. */
static ag_status slot_bytes(vk_state *s, size_t need, vk_chunk **out) {
  vk_slot *k;
  ag_status st = slot_open(s, &k);
  if (!st && k->args.used + need > k->args.size && !(st = flush(s))) st = slot_open(s, &k);
  if (st) return st;
  *out = &k->args;
  return AG_OK;
}

/* Fills len bytes at dst; the plain copy of a large piece goes over the
 * helper threads with non-temporal stores (the DMA engine reads it next). */
static void fill_piece(ag__fill_fn fill, void *user, unsigned char *dst, size_t off, size_t len) {
  if (fill == ag__fill_copy && len >= VK_INLINE_UPLOAD)
    ag__fill_parallel(ag__fill_copy_stream, user, dst, off, len);
  else if (len >= VK_INLINE_UPLOAD)
    ag__fill_parallel(fill, user, dst, off, len);
  else
    fill(dst, off, len, user);
}

/* Uploads are queued in order with the rest, never waited for: a small one
 * travels in the slot's argument memory; a large one in pieces of the
 * staging ring, each submitted as soon as it is filled (so the next fills
 * while it copies), a piece reused once the submission that copied it has
 * run. An upload is not recorded: it runs now, in recording too. */
static ag_status vk_upload(void *p, void *dst, size_t bytes, ag__fill_fn fill, void *user) {
  vk_state *s = p;
  vk_cmd x = {.op = OP_COPY};
  const vk_alloc *a;
  ag_status st = locate_in(s, (uint64_t)(uintptr_t)dst, bytes, &a, &x.dst, &x.dst_off);
  if (st || !bytes) return st;
  if (bytes <= VK_INLINE_UPLOAD) {
    if (a->map && queue_idle(s)) { /* nothing queued or running can touch it: written now */
      fill(a->map + x.dst_off, 0, bytes, user);
      return AG_OK;
    }
    vk_chunk *c;
    if ((st = slot_bytes(s, (bytes + 15) & ~(size_t)15, &c))) return st;
    fill(c->map + c->used, 0, bytes, user);
    x.src = c->buf, x.src_off = c->off + c->used, x.bytes = bytes;
    c->used += (bytes + 15) & ~(size_t)15;
    return queue_cmd(s, &x);
  }
  const VkDeviceSize at = x.dst_off;
  for (size_t done = 0; done < bytes; done += VK_PIECE) {
    const size_t len = bytes - done < VK_PIECE ? bytes - done : VK_PIECE;
    const int i = s->next_piece;
    if ((st = await(s, s->piece_ticket[i]))) return st; /* piece i is free again */
    s->next_piece = (i + 1) % VK_PIECES;
    fill_piece(fill, user, s->staging_map + (size_t)i * VK_PIECE, done, len);
    x.src = s->staging, x.src_off = (VkDeviceSize)i * VK_PIECE;
    x.dst_off = at + done, x.bytes = len;
    if ((st = queue_cmd(s, &x))) return st;
    s->piece_ticket[i] = open_ticket(s);
    if ((st = flush(s))) return st;
  }
  /* the caller's memory is free now (copied into staging); the copies run on */
  return AG_OK;
}

/* Downloads of mapped memory (a device whose device-local memory the host
 * sees) that is small, or cached for the host, are read by the host in
 * place: the queue is submitted behind a barrier that makes the device's
 * writes visible to the host, and its fence is the one wait. Others wait
 * for the queue, then copy in parts of AG_TRANSFER_PART_BYTES into the two
 * halves of the staging ring, the next part copying while the host drains
 * the last. */
static ag_status vk_download(void *p, const void *src, size_t bytes, ag__drain_fn drain, void *user) {
  vk_state *s = p;
  vk_cmd x = {.op = OP_COPY, .dst = s->staging};
  const vk_alloc *a;
  ag_status st = locate_in(s, (uint64_t)(uintptr_t)src, bytes, &a, &x.src, &x.src_off);
  if (!st && bytes && a->map && !s->copy_reads && (bytes <= VK_INLINE_UPLOAD || s->visible_cached)) {
    vk_slot *k;
    if ((st = slot_open(s, &k))) return st;
    barrier(k->cmd, s->last, ST_HOST); /* the next command still waits for the last: last stays */
    const uint64_t t = open_ticket(s);
    if ((st = flush(s)) || (st = await(s, t))) return st;
    const unsigned char *m = a->map + x.src_off;
    for (size_t off = 0; off < bytes; off += AG_TRANSFER_PART_BYTES)
      drain(m + off, off, bytes - off < AG_TRANSFER_PART_BYTES ? bytes - off : AG_TRANSFER_PART_BYTES, user);
    return AG_OK;
  }
  if (!st) st = drain_all(s); /* also frees every staging piece */
  if (st || !bytes) return st;
  const size_t part = AG_TRANSFER_PART_BYTES;
  const size_t parts = (bytes + part - 1) / part;
  const VkDeviceSize at = x.src_off;
  uint64_t ticket[2] = {0, 0};
  for (size_t i = 0; i <= parts; i++) {
    if (i < parts) { /* queue part i's copy */
      vk_slot *k;
      x.src_off = at + i * part, x.dst_off = (i % 2) * part;
      x.bytes = bytes - i * part < part ? bytes - i * part : part;
      if ((st = queue_cmd(s, &x)) || (st = slot_open(s, &k))) return st;
      barrier(k->cmd, s->last, ST_HOST); /* its bytes seen by the host (the next command still
                                            waits for the copy: last stays the transfer's) */
      ticket[i % 2] = open_ticket(s);
      if ((st = flush(s))) return st;
    }
    if (i > 0) { /* drain part i - 1 */
      const size_t j = i - 1, len = bytes - j * part < part ? bytes - j * part : part;
      if ((st = await(s, ticket[j % 2]))) return st;
      drain(s->staging_map + (j % 2) * part, j * part, len, user);
    }
  }
  return AG_OK;
}

static void *vk_native_stream(void *p) {
  (void)p;
  return NULL;
}

static ag_status vk_host_alloc(void *p, size_t bytes, void **out) {
  (void)p;
  void *m = ag__malloc(bytes ? bytes : 1);
  if (!m) return ag__fail(AG_ERR_OUT_OF_MEMORY, "vulkan: out of host memory");
  *out = m;
  return AG_OK;
}

static void vk_host_free(void *p, void *ptr) {
  (void)p;
  free(ptr);
}

/* ---- kernels ---- */

int ag__vk_pipe(vk_state *s, ag__vk_pipe_id id) {
  if ((int)id < 0 || id >= AG__VK_N_PIPES) return -1;
  return make_pipeline(s, (int)id) ? (int)id : -1;
}

int ag__vk_has_f64(const vk_state *s) { return s->f64; }

uint32_t ag__vk_groups(int64_t items, int local) {
  int64_t g = (items + local - 1) / local;
  return (uint32_t)(g < 1 ? 1 : g > 65535 ? 65535 : g);
}

ag_status ag__vk_dispatch(vk_state *s, int pipe, const void *push, size_t bytes, uint32_t gx, uint32_t gy,
                          uint32_t gz) {
  if (pipe < 0 || pipe >= AG__VK_N_PIPES || !s->pipes[pipe])
    return ag__fail(AG_ERR_UNSUPPORTED, "vulkan: a kernel's shader could not be made on this device");
  if (bytes > VK_PUSH_BYTES)
    return ag__fail(AG_ERR_INVALID_ARG, "vulkan: %zu bytes of push constants", bytes);
  if (bytes != ag__vk_push[pipe].bytes) /* another layout's struct: its members would be misread */
    return ag__fail(AG_ERR_INVALID_ARG,
                    "vulkan: %zu bytes of push constants for pipeline %s, whose layout %s has %zu", bytes,
                    ag__vk_shaders[pipe].name, ag__vk_push[pipe].name ? ag__vk_push[pipe].name : "(none)",
                    ag__vk_push[pipe].bytes);
  vk_cmd x = {.op = OP_DISPATCH, .pipe = pipe, .groups = {gx, gy, gz}, .push_bytes = (uint32_t)bytes};
  if (bytes) memcpy(x.push, push, bytes);
  return emit(s, &x);
}

ag_status ag__vk_args(vk_state *s, const void *data, size_t bytes, uint64_t *addr) {
  const size_t need = (bytes + 15) & ~(size_t)15;
  if (need > VK_ARG_CHUNK)
    return ag__fail(AG_ERR_INVALID_ARG, "vulkan: an argument block of %zu bytes (at most %zu)", bytes,
                    (size_t)VK_ARG_CHUNK);
  vk_chunk *c;
  if (s->rec) {
    vk_rec *r = s->rec;
    if (!r->n_chunks || r->chunks[r->n_chunks - 1].used + need > r->chunks[r->n_chunks - 1].size) {
      vk_chunk *m = ag__realloc(r->chunks, (size_t)(r->n_chunks + 1) * sizeof *m);
      if (!m) return ag__fail(AG_ERR_OUT_OF_MEMORY, "vulkan: out of host memory");
      r->chunks = m;
      ag_status st = make_chunk(s, VK_ARG_CHUNK, &r->chunks[r->n_chunks]);
      if (st) return st;
      r->n_chunks++;
    }
    c = &r->chunks[r->n_chunks - 1];
  } else {
    ag_status st = slot_bytes(s, need, &c);
    if (st) return st;
  }
  memcpy(c->map + c->used, data, bytes);
  *addr = c->addr + c->used;
  c->used += need;
  return AG_OK;
}

/* The kernel of id (NULL: not provided), from the kernel files' tables. */
static const ag__vk_kernel *kernel_of(ag__kernel_id id) {
  const ag__vk_kernel *tabs[] = {ag__vk_k_elementwise, ag__vk_k_linalg, ag__vk_k_optim, ag__vk_k_random,
                                 ag__vk_k_frames};
  const int ns[] = {ag__vk_n_elementwise, ag__vk_n_linalg, ag__vk_n_optim, ag__vk_n_random, ag__vk_n_frames};
  for (int t = 0; t < 5; t++)
    for (int i = 0; i < ns[t]; i++)
      if (tabs[t][i].id == id) return &tabs[t][i];
  return NULL;
}

const ag__kernel_id ag__vk_not_provided[] = {AG__K_QGRAD, AG__K_ACGRAD, AG__K_GATHER_FIELDS,
                                             AG__K_SCATTER_FIELDS};
const int ag__vk_n_not_provided = (int)(sizeof ag__vk_not_provided / sizeof ag__vk_not_provided[0]);

/* A kernel without a shader here (ag__vk_not_provided: no table has it) is
 * refused: its callers compose the same work from the kernels that are here. */
static int vk_supports(void *p, ag__kernel_id id, const void *args, size_t size) {
  (void)size;
  const ag__vk_kernel *k = kernel_of(id);
  return k && args && (!k->supports || k->supports(p, args));
}

static ag_status vk_run(void *p, ag__kernel_id id, const void *args, size_t size) {
  if (!args) return ag__fail(AG_ERR_INVALID_ARG, "vulkan: kernel %d run without arguments", (int)id);
  if (!vk_supports(p, id, args, size))
    return ag__fail(AG_ERR_UNSUPPORTED, "vulkan: kernel %d is not provided for these arguments", (int)id);
  return kernel_of(id)->run(p, args);
}

static size_t vk_scratch(void *p, ag__kernel_id id, const void *args, size_t size) {
  (void)p, (void)size;
  const ag__vk_kernel *k = kernel_of(id);
  return k && k->scratch ? k->scratch(args) : 0;
}

/* ---- recording: a command buffer, encoded once, submitted at every replay ---- */

/* Frees a recording (its command buffer once the replays queued so far
 * have run, its argument chunks kept until then). */
static void free_rec(vk_state *s, vk_rec *r) {
  if (!r) return;
  if (r->cmd) {
    if (await(s, r->ticket)) vkQueueWaitIdle(s->queue); /* a device error: wait it out */
    vkFreeCommandBuffers(s->dev, s->pool, 1, &r->cmd);
  }
  for (int i = 0; i < r->n_chunks; i++) {
    vk_chunk *c = &r->chunks[i];
    entomb(s, c->blk, c->off, c->size);
  }
  free(r->chunks);
  free(r->cmds);
  free(r);
}

static ag_status vk_record_begin(void *p) {
  vk_state *s = p;
  if (s->rec) return ag__fail(AG_ERR_STATE, "vulkan: a recording is already in progress");
  vk_rec *r = ag__calloc(1, sizeof *r);
  if (!r) return ag__fail(AG_ERR_OUT_OF_MEMORY, "vulkan: out of host memory");
  s->rec = r;
  return AG_OK;
}

/* Encodes recording r's commands into a command buffer of its own, after a
 * barrier from every compute and transfer command submitted before it
 * (each replay is submitted behind other work). */
static ag_status encode_rec(vk_state *s, vk_rec *r) {
  VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = s->pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkResult res = vkAllocateCommandBuffers(s->dev, &ai, &r->cmd);
  if (res != VK_SUCCESS) {
    r->cmd = VK_NULL_HANDLE;
    return vk_fail(res, "vkAllocateCommandBuffers (a recording)");
  }
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT; /* replayed again while a replay runs */
  if ((res = vkBeginCommandBuffer(r->cmd, &bi)) != VK_SUCCESS) return vk_fail(res, "vkBeginCommandBuffer");
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags both = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  vkCmdPipelineBarrier(r->cmd, both, both, 0, 1, &mb, 0, NULL, 0, NULL);
  int last = ST_NONE; /* the first command needs no other barrier */
  for (int i = 0; i < r->n; i++) encode(s, r->cmd, &r->cmds[i], &last);
  if ((res = vkEndCommandBuffer(r->cmd)) != VK_SUCCESS)
    return vk_fail(res, "vkEndCommandBuffer (a recording)");
  r->last = last;
  free(r->cmds); /* encoded: no longer needed */
  r->cmds = NULL;
  r->cap = 0;
  return AG_OK;
}

static ag_status vk_record_end(void *p, int ok, void **rec, int *n_nodes) {
  vk_state *s = p;
  vk_rec *r = s->rec;
  if (!r) return ag__fail(AG_ERR_STATE, "vulkan: no recording in progress");
  s->rec = NULL;
  ag_status st = AG_OK;
  if (ok && r->n > 0) st = encode_rec(s, r);
  if (!ok || st) {
    free_rec(s, r);
    return st;
  }
  *rec = r;
  if (n_nodes) *n_nodes = r->n;
  return AG_OK;
}

/* A replay submits the recorded command buffer behind what the current
 * slot holds, in one submission: nothing is encoded. The next command
 * queued takes the barrier that the recording's last command calls for. */
static ag_status vk_replay(void *p, void *rec) {
  vk_state *s = p;
  vk_rec *r = rec;
  if (!r) return ag__fail(AG_ERR_INVALID_ARG, "vulkan: no recording to replay");
  if (s->rec) return ag__fail(AG_ERR_STATE, "vulkan: a replay while recording");
  if (!r->cmd) return AG_OK; /* a step of no command */
  ag_status st = submit(s, r->cmd);
  if (st) return st;
  r->ticket = s->submitted;
  s->last = r->last;
  return AG_OK;
}

static void vk_record_free(void *p, void *rec) {
  if (rec) free_rec(p, rec);
}

static const ag__backend vk_backend = {
    .name = "vulkan",
    .kind = AG_DEVICE_VULKAN,
    .open = vk_open,
    .close = vk_close,
    .mem_info = vk_mem_info,
    .alloc = vk_alloc_mem,
    .release = vk_release,
    .zero = vk_zero,
    .upload = vk_upload,
    .download = vk_download,
    .copy = vk_copy,
    .sync = vk_sync,
    .native_stream = vk_native_stream,
    .alloc_static = vk_alloc_mem,
    .release_static = vk_release,
    .host_alloc = vk_host_alloc,
    .host_free = vk_host_free,
    .run = vk_run,
    .supports = vk_supports,
    .record_begin = vk_record_begin,
    .record_end = vk_record_end,
    .replay = vk_replay,
    .record_free = vk_record_free,
    .scratch = vk_scratch,
};

const ag__backend *ag__vulkan_backend(void) { return &vk_backend; }

uint64_t ag__vulkan_encodes(const void *state) { return state ? ((const vk_state *)state)->encodes : 0; }

int ag__vulkan_validation_total(int *states, char *last, size_t last_len) {
  *states = __atomic_load_n(&total_states_validated, __ATOMIC_RELAXED);
  if (last && last_len) snprintf(last, last_len, "%s", total_last);
  return __atomic_load_n(&total_errors, __ATOMIC_RELAXED);
}
