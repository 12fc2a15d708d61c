/* backend.c — the Vulkan backend's device, memory and transfers.
 *
 * Addresses. Device memory is handed to the core as buffer device
 * addresses (Vulkan 1.2's bufferDeviceAddress): every allocation is a
 * VkBuffer of its own memory, and the pointer the core holds is its
 * address (rounded up to 256 bytes), so the core's offsets and views work
 * as on CUDA, and a kernel takes 64-bit addresses in its push constants
 * (GL_EXT_buffer_reference). The backend finds the buffer of an address by
 * a binary search over its allocations (sorted by address), for the copies
 * that take a buffer and an offset.
 *
 * Transfers go through a host-visible staging buffer of two parts of
 * AG_TRANSFER_PART_BYTES: an upload fills one part while the copy of the
 * other runs, each part's copy submitted with its own fence, waited for
 * before the part is filled again; a download copies a part, waits, and
 * drains it. Every call is ordered on the one compute queue; sync waits for
 * it to drain.
 *
 * Kernels are compute pipelines of the shaders in src/vulkan/shaders
 * (compiled to SPIR-V at build time and embedded), their arguments in push
 * constants (addresses and sizes), each dispatch between barriers; so far
 * each waits for its end (the queue is not yet kept full), and recordings
 * are not provided.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vulkan/vulkan.h>

#include "agrl/buffer.h" /* AG_TRANSFER_PART_BYTES */
#include "base/backend.h"
#include "base/base.h"
#include "vulkan/vk_internal.h"

#define VK_ALIGN 256u
#define VK_MAX_SHADERS 64
#define VK_PUSH_BYTES 128 /* the push constants every device takes */
#define VK_GROUP 256      /* the shaders' local size */

typedef struct vk_alloc {
  uint64_t base; /* the buffer's device address */
  size_t bytes;  /* the buffer's size */
  uint64_t addr; /* what the core was given: base rounded up to VK_ALIGN */
  size_t len;    /* what it asked for */
  VkBuffer buf;
  VkDeviceMemory mem;
} vk_alloc;

typedef struct vk_state {
  VkInstance inst;
  VkDebugUtilsMessengerEXT dbg;
  VkPhysicalDevice phys;
  VkDevice dev;
  VkQueue queue;
  uint32_t qfam;
  VkCommandPool pool;
  VkCommandBuffer cmd[2];
  VkFence fence[2];
  int busy[2]; /* part i's copy submitted, its fence not yet waited for */
  uint32_t mem_device, mem_host;
  uint32_t heap_device;
  int has_budget;
  VkBuffer staging;
  VkDeviceMemory staging_mem;
  unsigned char *staging_map;
  vk_alloc *allocs; /* sorted by base */
  size_t n_allocs, cap_allocs;
  size_t allocated;
  VkPipelineLayout layout; /* every kernel's: push constants only */
  VkShaderModule mods[VK_MAX_SHADERS];
  VkPipeline pipes[VK_MAX_SHADERS];
  int kernel_pipe[AG__K_COUNT]; /* the pipeline of a kernel, -1: not provided */
  int validating;               /* the layer and its messenger are on */
  int validation_errors;
  char last_validation[512];
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
  (void)type;
  vk_state *s = user;
  if (sev & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
    s->validation_errors++;
    snprintf(s->last_validation, sizeof s->last_validation, "%s",
             data && data->pMessage ? data->pMessage : "?");
    __atomic_fetch_add(&total_errors, 1, __ATOMIC_RELAXED);
    snprintf(total_last, sizeof total_last, "%s", s->last_validation);
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

/* An instance of Vulkan 1.2 (with the validation layer and a messenger
 * reporting to s when asked and s is given). */
static ag_status make_instance(vk_state *s, VkInstance *out) {
  const char *layer = "VK_LAYER_KHRONOS_validation", *ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
  const int validate = s && validation_wanted() && layer_present(layer);
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "agrl";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  if (validate) {
    ci.enabledLayerCount = 1, ci.ppEnabledLayerNames = &layer;
    ci.enabledExtensionCount = 1, ci.ppEnabledExtensionNames = &ext;
  }
  VkResult r = vkCreateInstance(&ci, NULL, out);
  if (r != VK_SUCCESS) return vk_fail(r, "vkCreateInstance");
  if (validate) {
    PFN_vkCreateDebugUtilsMessengerEXT mk =
        (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(*out, "vkCreateDebugUtilsMessengerEXT");
    VkDebugUtilsMessengerCreateInfoEXT di = {.sType =
                                                 VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    di.messageSeverity =
        VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT;
    di.messageType =
        VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT;
    di.pfnUserCallback = on_message;
    di.pUserData = s;
    if (mk && mk(*out, &di, NULL, &s->dbg) == VK_SUCCESS) {
      s->validating = 1;
      __atomic_fetch_add(&total_states_validated, 1, __ATOMIC_RELAXED);
    }
  }
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
  ag_status s = make_instance(NULL, &inst);
  if (s) {
    ag__fail(AG_OK, "%s", ""); /* no loader or driver: no device, and no error left behind */
    return 0;
  }
  VkPhysicalDevice d[16];
  const uint32_t n = usable_devices(inst, d, 16);
  vkDestroyInstance(inst, NULL);
  return (int)n;
}

/* ---- memory types ---- */

static int mem_type(const vk_state *s, uint32_t bits, VkMemoryPropertyFlags want) {
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(s->phys, &mp);
  for (uint32_t i = 0; i < mp.memoryTypeCount; i++)
    if ((bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) return (int)i;
  return -1;
}

/* A buffer of `bytes` in memory type `type`, for storage and transfers
 * (and device addresses when addr). */
static ag_status make_buffer(vk_state *s, size_t bytes, int host, VkBuffer *buf, VkDeviceMemory *mem) {
  VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = bytes;
  bi.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  if (!host) bi.usage |= VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkResult r = vkCreateBuffer(s->dev, &bi, NULL, buf);
  if (r != VK_SUCCESS) return vk_fail(r, "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(s->dev, *buf, &req);
  const int type = mem_type(s, req.memoryTypeBits,
                            host ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                                 : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (type < 0) {
    vkDestroyBuffer(s->dev, *buf, NULL);
    return ag__fail(AG_ERR_DEVICE, "vulkan: no %s memory type for a buffer",
                    host ? "host-visible" : "device-local");
  }
  VkMemoryAllocateFlagsInfo fi = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
  fi.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.pNext = host ? NULL : &fi;
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
  return AG_OK;
}

/* ---- opening and closing ---- */

static void vk_close(void *p) {
  vk_state *s = p;
  if (!s) return;
  if (s->dev) {
    vkDeviceWaitIdle(s->dev);
    for (size_t i = 0; i < s->n_allocs; i++) {
      vkDestroyBuffer(s->dev, s->allocs[i].buf, NULL);
      vkFreeMemory(s->dev, s->allocs[i].mem, NULL);
    }
    if (s->staging_map) vkUnmapMemory(s->dev, s->staging_mem);
    if (s->staging) vkDestroyBuffer(s->dev, s->staging, NULL);
    if (s->staging_mem) vkFreeMemory(s->dev, s->staging_mem, NULL);
    for (int i = 0; i < VK_MAX_SHADERS; i++) {
      if (s->pipes[i]) vkDestroyPipeline(s->dev, s->pipes[i], NULL);
      if (s->mods[i]) vkDestroyShaderModule(s->dev, s->mods[i], NULL);
    }
    if (s->layout) vkDestroyPipelineLayout(s->dev, s->layout, NULL);
    for (int i = 0; i < 2; i++)
      if (s->fence[i]) vkDestroyFence(s->dev, s->fence[i], NULL);
    if (s->pool) vkDestroyCommandPool(s->dev, s->pool, NULL);
    vkDestroyDevice(s->dev, NULL);
  }
  if (s->dbg) {
    PFN_vkDestroyDebugUtilsMessengerEXT rm = (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
        s->inst, "vkDestroyDebugUtilsMessengerEXT");
    if (rm) rm(s->inst, s->dbg, NULL);
  }
  if (s->inst) vkDestroyInstance(s->inst, NULL);
  free(s->allocs);
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

/* The kernels the shaders provide, by the shader's name. */
static const struct {
  const char *name;
  ag__kernel_id id;
} shader_kernels[] = {{"fill", AG__K_FILL},
                      {"copy", AG__K_COPY},
                      {"map", AG__K_MAP},
                      {"map2", AG__K_MAP2},
                      {"gather", AG__K_GATHER}};

/* The layout and one compute pipeline a shader. */
static ag_status make_pipelines(vk_state *s) {
  for (int k = 0; k < AG__K_COUNT; k++) s->kernel_pipe[k] = -1;
  VkPushConstantRange pr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, VK_PUSH_BYTES};
  VkPipelineLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  li.pushConstantRangeCount = 1;
  li.pPushConstantRanges = &pr;
  VkResult r = vkCreatePipelineLayout(s->dev, &li, NULL, &s->layout);
  if (r != VK_SUCCESS) return vk_fail(r, "vkCreatePipelineLayout");
  for (int i = 0; i < ag__vk_n_shaders && i < VK_MAX_SHADERS; i++) {
    const ag__vk_shader *sh = &ag__vk_shaders[i];
    VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    mi.codeSize = sh->bytes;
    mi.pCode = (const uint32_t *)(const void *)sh->spv;
    r = vkCreateShaderModule(s->dev, &mi, NULL, &s->mods[i]);
    if (r != VK_SUCCESS) return vk_fail(r, "vkCreateShaderModule");
    VkComputePipelineCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = s->mods[i];
    ci.stage.pName = "main";
    ci.layout = s->layout;
    r = vkCreateComputePipelines(s->dev, VK_NULL_HANDLE, 1, &ci, NULL, &s->pipes[i]);
    if (r != VK_SUCCESS) return vk_fail(r, "vkCreateComputePipelines");
    for (size_t k = 0; k < sizeof shader_kernels / sizeof shader_kernels[0]; k++)
      if (strcmp(shader_kernels[k].name, sh->name) == 0) s->kernel_pipe[shader_kernels[k].id] = i;
  }
  return AG_OK;
}

static ag_status vk_open(int index, void **out, char *desc, size_t desc_len) {
  vk_state *s = ag__calloc(1, sizeof *s);
  if (!s) return ag__fail(AG_ERR_OUT_OF_MEMORY, "vulkan: out of host memory");
  ag_status st = make_instance(s, &s->inst);
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
  VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = s->qfam;
  r = vkCreateCommandPool(s->dev, &pi, NULL, &s->pool);
  VkCommandBufferAllocateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ci.commandPool = s->pool;
  ci.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ci.commandBufferCount = 2;
  if (r == VK_SUCCESS) r = vkAllocateCommandBuffers(s->dev, &ci, s->cmd);
  VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  for (int i = 0; i < 2 && r == VK_SUCCESS; i++) r = vkCreateFence(s->dev, &fi, NULL, &s->fence[i]);
  if (r != VK_SUCCESS) {
    vk_close(s);
    return vk_fail(r, "creating the command pool and fences");
  }
  if ((st = make_pipelines(s))) {
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
  if ((st = make_buffer(s, 2 * (size_t)AG_TRANSFER_PART_BYTES, 1, &s->staging, &s->staging_mem))) {
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

static ag_status vk_alloc_mem(void *p, size_t bytes, void **out) {
  vk_state *s = p;
  if (s->n_allocs == s->cap_allocs) {
    const size_t cap = s->cap_allocs ? 2 * s->cap_allocs : 64;
    vk_alloc *a = ag__realloc(s->allocs, cap * sizeof *a);
    if (!a) return ag__fail(AG_ERR_OUT_OF_MEMORY, "vulkan: out of host memory");
    s->allocs = a, s->cap_allocs = cap;
  }
  const size_t size = (bytes ? bytes : 1) + VK_ALIGN; /* room to round the address up */
  vk_alloc x = {0, size, 0, bytes, VK_NULL_HANDLE, VK_NULL_HANDLE};
  ag_status st = make_buffer(s, size, 0, &x.buf, &x.mem);
  if (st) return st;
  VkBufferDeviceAddressInfo ai = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
  ai.buffer = x.buf;
  x.base = vkGetBufferDeviceAddress(s->dev, &ai);
  x.addr = (x.base + VK_ALIGN - 1) & ~(uint64_t)(VK_ALIGN - 1);
  size_t at = s->n_allocs;
  while (at > 0 && s->allocs[at - 1].base > x.base) at--;
  memmove(&s->allocs[at + 1], &s->allocs[at], (s->n_allocs - at) * sizeof *s->allocs);
  s->allocs[at] = x;
  s->n_allocs++;
  s->allocated += size;
  *out = (void *)(uintptr_t)x.addr;
  return AG_OK;
}

static void vk_release(void *p, void *ptr) {
  vk_state *s = p;
  if (!ptr) return;
  const vk_alloc *x = find(s, (uint64_t)(uintptr_t)ptr);
  if (!x) return;
  vkQueueWaitIdle(s->queue); /* after the queued work that uses it */
  const size_t at = (size_t)(x - s->allocs);
  vkDestroyBuffer(s->dev, x->buf, NULL);
  vkFreeMemory(s->dev, x->mem, NULL);
  s->allocated -= x->bytes;
  memmove(&s->allocs[at], &s->allocs[at + 1], (s->n_allocs - at - 1) * sizeof *s->allocs);
  s->n_allocs--;
}

/* The buffer and offset of [a, a + bytes), which must lie in one allocation. */
static ag_status locate(const vk_state *s, uint64_t a, size_t bytes, VkBuffer *buf, VkDeviceSize *off) {
  const vk_alloc *x = find(s, a);
  if (!x || a < x->addr || bytes > x->len || a - x->addr > x->len - bytes)
    return ag__fail(AG_ERR_INVALID_ARG, "vulkan: %zu bytes at 0x%llx are not inside one allocation", bytes,
                    (unsigned long long)a);
  *buf = x->buf;
  *off = a - x->base;
  return AG_OK;
}

/* ---- submissions ---- */

/* Waits for part i's fence if its copy is in flight. */
static ag_status settle(vk_state *s, int i) {
  if (!s->busy[i]) return AG_OK;
  VkResult r = vkWaitForFences(s->dev, 1, &s->fence[i], VK_TRUE, UINT64_MAX);
  if (r == VK_SUCCESS) r = vkResetFences(s->dev, 1, &s->fence[i]);
  s->busy[i] = 0;
  return r == VK_SUCCESS ? AG_OK : vk_fail(r, "waiting for a transfer");
}

static ag_status begin(vk_state *s, int i) {
  ag_status st = settle(s, i);
  if (st) return st;
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VkResult r = vkResetCommandBuffer(s->cmd[i], 0);
  if (r == VK_SUCCESS) r = vkBeginCommandBuffer(s->cmd[i], &bi);
  return r == VK_SUCCESS ? AG_OK : vk_fail(r, "vkBeginCommandBuffer");
}

/* Ends command buffer i and submits it with its fence (wait: and waits). */
static ag_status submit(vk_state *s, int i, int wait) {
  VkResult r = vkEndCommandBuffer(s->cmd[i]);
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &s->cmd[i];
  if (r == VK_SUCCESS) r = vkQueueSubmit(s->queue, 1, &si, s->fence[i]);
  if (r != VK_SUCCESS) return vk_fail(r, "vkQueueSubmit");
  s->busy[i] = 1;
  return wait ? settle(s, i) : AG_OK;
}

/* A barrier: transfers before it complete before those after it. */
static void transfer_barrier(VkCommandBuffer c) {
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT |
                     VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(
      c, VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
      VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0,
      1, &mb, 0, NULL, 0, NULL);
}

static ag_status vk_sync(void *p) {
  vk_state *s = p;
  ag_status st = settle(s, 0);
  if (!st) st = settle(s, 1);
  if (st) return st;
  VkResult r = vkQueueWaitIdle(s->queue);
  return r == VK_SUCCESS ? AG_OK : vk_fail(r, "vkQueueWaitIdle");
}

static ag_status vk_zero(void *p, void *dst, size_t bytes) {
  vk_state *s = p;
  if (!bytes) return AG_OK;
  VkBuffer b;
  VkDeviceSize off;
  ag_status st = locate(s, (uint64_t)(uintptr_t)dst, bytes, &b, &off);
  if (st || (st = begin(s, 0))) return st;
  transfer_barrier(s->cmd[0]);
  if (off % 4 == 0 && bytes % 4 == 0) {
    vkCmdFillBuffer(s->cmd[0], b, off, bytes, 0);
  } else { /* fill takes whole words: the staging part's zeros for the rest */
    const size_t part = AG_TRANSFER_PART_BYTES;
    memset(s->staging_map, 0, bytes < part ? bytes : part);
    for (size_t done = 0; done < bytes; done += part) {
      VkBufferCopy c = {0, off + done, bytes - done < part ? bytes - done : part};
      vkCmdCopyBuffer(s->cmd[0], s->staging, b, 1, &c);
    }
  }
  return submit(s, 0, 1);
}

static ag_status vk_upload(void *p, void *dst, size_t bytes, ag__fill_fn fill, void *user) {
  vk_state *s = p;
  VkBuffer b;
  VkDeviceSize off;
  ag_status st = locate(s, (uint64_t)(uintptr_t)dst, bytes, &b, &off);
  const size_t part = AG_TRANSFER_PART_BYTES;
  int i = 0;
  for (size_t done = 0; !st && done < bytes; done += part, i ^= 1) {
    const size_t len = bytes - done < part ? bytes - done : part;
    if ((st = settle(s, i))) break; /* part i is free again */
    fill(s->staging_map + (size_t)i * part, done, len, user);
    if ((st = begin(s, i))) break;
    transfer_barrier(s->cmd[i]);
    VkBufferCopy c = {(VkDeviceSize)i * part, off + done, len};
    vkCmdCopyBuffer(s->cmd[i], s->staging, b, 1, &c);
    st = submit(s, i, 0);
  }
  /* the caller's memory is free now (copied into staging); the copies run on */
  return st;
}

static ag_status vk_download(void *p, const void *src, size_t bytes, ag__drain_fn drain, void *user) {
  vk_state *s = p;
  VkBuffer b;
  VkDeviceSize off;
  ag_status st = locate(s, (uint64_t)(uintptr_t)src, bytes, &b, &off);
  const size_t part = AG_TRANSFER_PART_BYTES;
  for (size_t done = 0; !st && done < bytes; done += part) {
    const size_t len = bytes - done < part ? bytes - done : part;
    if ((st = settle(s, 1)) || (st = begin(s, 0))) break;
    transfer_barrier(s->cmd[0]);
    VkBufferCopy c = {off + done, 0, len};
    vkCmdCopyBuffer(s->cmd[0], b, s->staging, 1, &c);
    transfer_barrier(s->cmd[0]);
    if ((st = submit(s, 0, 1))) break;
    drain(s->staging_map, done, len, user);
  }
  return st;
}

static ag_status vk_copy(void *p, void *dst, const void *src, size_t bytes) {
  vk_state *s = p;
  if (!bytes) return AG_OK;
  VkBuffer bd, bs;
  VkDeviceSize od, os;
  ag_status st = locate(s, (uint64_t)(uintptr_t)dst, bytes, &bd, &od);
  if (!st) st = locate(s, (uint64_t)(uintptr_t)src, bytes, &bs, &os);
  if (st || (st = begin(s, 0))) return st;
  transfer_barrier(s->cmd[0]);
  VkBufferCopy c = {os, od, bytes};
  vkCmdCopyBuffer(s->cmd[0], bs, bd, 1, &c);
  return submit(s, 0, 1);
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

/* Runs pipeline `pipe` over `groups` groups with the push constants push. */
static ag_status dispatch(vk_state *s, int pipe, const void *push, size_t bytes, int64_t items) {
  if (items <= 0) return AG_OK;
  int64_t groups = (items + VK_GROUP - 1) / VK_GROUP;
  if (groups > 65535) groups = 65535; /* the shaders stride over the rest */
  ag_status st = begin(s, 0);
  if (st) return st;
  transfer_barrier(s->cmd[0]);
  vkCmdBindPipeline(s->cmd[0], VK_PIPELINE_BIND_POINT_COMPUTE, s->pipes[pipe]);
  vkCmdPushConstants(s->cmd[0], s->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, (uint32_t)bytes, push);
  vkCmdDispatch(s->cmd[0], (uint32_t)groups, 1, 1);
  transfer_barrier(s->cmd[0]);
  return submit(s, 0, 1);
}

static ag_status vk_run(void *p, ag__kernel_id id, const void *args, size_t size) {
  (void)size;
  vk_state *s = p;
  const int pipe = (int)id >= 0 && id < AG__K_COUNT ? s->kernel_pipe[id] : -1;
  if (pipe < 0) return ag__fail(AG_ERR_UNSUPPORTED, "vulkan: kernel %d is not provided yet", (int)id);
  switch (id) {
    case AG__K_FILL: {
      const ag__fill_args *a = args;
      struct {
        uint64_t out;
        int64_t rows, cols, ld;
        float value, pad;
      } pc = {(uint64_t)(uintptr_t)a->out.p, a->out.rows, a->out.cols, a->out.ld, a->value, 0.0f};
      return dispatch(s, pipe, &pc, sizeof pc, a->out.rows * a->out.cols);
    }
    case AG__K_COPY: {
      const ag__copy_args *a = args;
      struct {
        uint64_t x, out;
        int64_t rows, cols, x_ld, out_ld;
        int32_t accumulate, pad;
      } pc = {(uint64_t)(uintptr_t)a->x.p,
              (uint64_t)(uintptr_t)a->out.p,
              a->out.rows,
              a->out.cols,
              a->x.ld,
              a->out.ld,
              a->accumulate,
              0};
      return dispatch(s, pipe, &pc, sizeof pc, a->out.rows * a->out.cols);
    }
    case AG__K_MAP: {
      const ag__map_args *a = args;
      struct {
        uint64_t x, out;
        int64_t x_rows, x_cols, x_ld, rows, cols, ld;
        float p0, p1;
        int32_t op, accumulate;
      } pc = {(uint64_t)(uintptr_t)a->x.p,
              (uint64_t)(uintptr_t)a->out.p,
              a->x.rows,
              a->x.cols,
              a->x.ld,
              a->out.rows,
              a->out.cols,
              a->out.ld,
              a->p0,
              a->p1,
              (int32_t)a->op,
              a->accumulate};
      return dispatch(s, pipe, &pc, sizeof pc, a->out.rows * a->out.cols);
    }
    case AG__K_MAP2: {
      const ag__map2_args *a = args;
      struct {
        uint64_t a, b, out;
        int64_t a_rows, a_cols, a_ld, b_rows, b_cols, b_ld, rows, cols, ld;
        float alpha, p0, p1;
        int32_t op, accumulate;
      } pc = {(uint64_t)(uintptr_t)a->a.p,
              (uint64_t)(uintptr_t)a->b.p,
              (uint64_t)(uintptr_t)a->out.p,
              a->a.rows,
              a->a.cols,
              a->a.ld,
              a->b.rows,
              a->b.cols,
              a->b.ld,
              a->out.rows,
              a->out.cols,
              a->out.ld,
              a->alpha,
              a->p0,
              a->p1,
              (int32_t)a->op,
              a->accumulate};
      _Static_assert(sizeof pc <= VK_PUSH_BYTES, "MAP2's push constants fit");
      return dispatch(s, pipe, &pc, sizeof pc, a->out.rows * a->out.cols);
    }
    case AG__K_GATHER: {
      const ag__gather_args *a = args;
      if (a->idx_dtype != AG_I32 && a->idx_dtype != AG_I64)
        return ag__fail(AG_ERR_INVALID_ARG, "vulkan: gather indices must be i32 or i64");
      struct {
        uint64_t src, idx, dst;
        int64_t rows, capacity, n;
        float scale;
        int32_t src_dtype, idx_dtype, pad;
      } pc = {(uint64_t)(uintptr_t)a->src,
              (uint64_t)(uintptr_t)a->idx,
              (uint64_t)(uintptr_t)a->dst,
              a->rows,
              a->capacity,
              a->n,
              a->scale,
              (int32_t)a->src_dtype,
              (int32_t)a->idx_dtype,
              0};
      return dispatch(s, pipe, &pc, sizeof pc, a->rows * a->n);
    }
    default: return ag__fail(AG_ERR_UNSUPPORTED, "vulkan: kernel %d is not provided yet", (int)id);
  }
}

static int vk_supports(void *p, ag__kernel_id id, const void *args, size_t size) {
  (void)args, (void)size;
  const vk_state *s = p;
  return (int)id >= 0 && id < AG__K_COUNT && s->kernel_pipe[id] >= 0;
}

static ag_status vk_record_begin(void *p) {
  (void)p;
  return ag__fail(AG_ERR_UNSUPPORTED, "vulkan: recordings are not provided yet");
}

static ag_status vk_record_end(void *p, int ok, void **rec, int *n_nodes) {
  (void)p, (void)ok, (void)rec, (void)n_nodes;
  return ag__fail(AG_ERR_STATE, "vulkan: no recording in progress");
}

static ag_status vk_replay(void *p, void *rec) {
  (void)p, (void)rec;
  return ag__fail(AG_ERR_UNSUPPORTED, "vulkan: recordings are not provided yet");
}

static void vk_record_free(void *p, void *rec) { (void)p, (void)rec; }

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
};

const ag__backend *ag__vulkan_backend(void) { return &vk_backend; }

int ag__vulkan_validation_total(int *states, char *last, size_t last_len) {
  *states = __atomic_load_n(&total_states_validated, __ATOMIC_RELAXED);
  if (last && last_len) snprintf(last, last_len, "%s", total_last);
  return __atomic_load_n(&total_errors, __ATOMIC_RELAXED);
}
