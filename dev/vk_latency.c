/* vk_latency.c — how long a submit and its fence take on a Vulkan device:
 * the fixed cost behind a small waited-for write. Build:
 *   cc -O2 dev/vk_latency.c -o /tmp/vk_latency -lvulkan
 * Prints microseconds per round trip (median of 2000) for: an empty
 * submit, a submit of one 4-byte copy, each waited by vkWaitForFences or
 * by polling vkGetFenceStatus, a timeline semaphore polled, and the cost
 * of vkQueueSubmit alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vulkan/vulkan.h>

#include "probe_time.h"

#define N 2000
#define CK(x)                              \
  do {                                     \
    VkResult r_ = (x);                     \
    if (r_) {                              \
      fprintf(stderr, "%s: %d\n", #x, r_); \
      exit(1);                             \
    }                                      \
  } while (0)

int main(void) {
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = VK_API_VERSION_1_2};
  VkInstanceCreateInfo ii = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
  VkInstance inst;
  CK(vkCreateInstance(&ii, NULL, &inst));
  uint32_t n = 8;
  VkPhysicalDevice pd[8];
  CK(vkEnumeratePhysicalDevices(inst, &n, pd));
  VkPhysicalDeviceProperties pp;
  vkGetPhysicalDeviceProperties(pd[0], &pp);
  printf("device: %s\n", pp.deviceName);
  float prio = 1;
  VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                .queueFamilyIndex = 0,
                                .queueCount = 1,
                                .pQueuePriorities = &prio};
  VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                          .timelineSemaphore = VK_TRUE};
  VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                           .pNext = &f12,
                           .queueCreateInfoCount = 1,
                           .pQueueCreateInfos = &qi};
  VkDevice dev;
  CK(vkCreateDevice(pd[0], &di, NULL, &dev));
  VkQueue q;
  vkGetDeviceQueue(dev, 0, 0, &q);
  VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT};
  VkCommandPool pool;
  CK(vkCreateCommandPool(dev, &pi, NULL, &pool));
  VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                    .commandPool = pool,
                                    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                    .commandBufferCount = 1};
  VkCommandBuffer cb;
  CK(vkAllocateCommandBuffers(dev, &ai, &cb));
  VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                           .size = 4096,
                           .usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT};
  VkBuffer b[3];
  VkDeviceMemory m[3];
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(pd[0], &mp);
  for (int i = 0; i < 3; i++) {
    CK(vkCreateBuffer(dev, &bi, NULL, &b[i]));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev, b[i], &req);
    uint32_t t = 0;
    VkMemoryPropertyFlags want =
        i == 0   ? VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
        : i == 1 ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
                 : VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    while (t < mp.memoryTypeCount &&
           !((req.memoryTypeBits >> t & 1) && (mp.memoryTypes[t].propertyFlags & want) == want))
      t++;
    VkMemoryAllocateInfo ma = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size, .memoryTypeIndex = t};
    CK(vkAllocateMemory(dev, &ma, NULL, &m[i]));
    CK(vkBindBufferMemory(dev, b[i], m[i], 0));
  }
  VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkFence f;
  CK(vkCreateFence(dev, &fi, NULL, &f));
  VkSemaphoreTypeCreateInfo ti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                  .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
  VkSemaphoreCreateInfo si0 = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti};
  VkSemaphore sem;
  CK(vkCreateSemaphore(dev, &si0, NULL, &sem));
  uint64_t tl = 0;
  static const char *names[] = {"empty, vkWaitForFences",          "empty, poll fence",
                                "copy, vkWaitForFences",           "copy, poll fence",
                                "copy, timeline polled",           "copy, vkQueueWaitIdle",
                                "copy, timeline vkWaitSemaphores", "barrier + copy from BAR, poll fence",
                                "barrier + copy, poll fence"};
  for (int mode = 0; mode < 9; mode++) {
    double v[N], sub[N];
    for (int it = 0; it < N; it++) {
      const int copy = mode >= 2;
      double t0 = now();
      VkCommandBufferBeginInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                      .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
      CK(vkResetCommandBuffer(cb, 0));
      CK(vkBeginCommandBuffer(cb, &cbi));
      if (mode >= 7) {
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
        vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0,
                             NULL, 0, NULL);
      }
      if (copy) {
        VkBufferCopy c = {0, 0, 168};
        vkCmdCopyBuffer(cb, b[mode == 7 ? 2 : 1], b[0], 1, &c);
      }
      CK(vkEndCommandBuffer(cb));
      VkTimelineSemaphoreSubmitInfo ts = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
      uint64_t next = tl + 1;
      ts.signalSemaphoreValueCount = 1;
      ts.pSignalSemaphoreValues = &next;
      VkSubmitInfo si = {
          .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
      const int timeline = mode == 4 || mode == 6;
      if (timeline) si.pNext = &ts, si.signalSemaphoreCount = 1, si.pSignalSemaphores = &sem;
      double t1 = now();
      CK(vkQueueSubmit(q, 1, &si, timeline || mode == 5 ? VK_NULL_HANDLE : f));
      sub[it] = now() - t1;
      if (mode == 0 || mode == 2) CK(vkWaitForFences(dev, 1, &f, VK_TRUE, UINT64_MAX));
      if (mode == 1 || mode == 3 || mode >= 7)
        while (vkGetFenceStatus(dev, f) == VK_NOT_READY) {
        }
      if (mode == 4) {
        uint64_t val = 0;
        do CK(vkGetSemaphoreCounterValue(dev, sem, &val));
        while (val < next);
      }
      if (mode == 5) CK(vkQueueWaitIdle(q));
      if (mode == 6) {
        VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                                  .semaphoreCount = 1,
                                  .pSemaphores = &sem,
                                  .pValues = &next};
        CK(vkWaitSemaphores(dev, &wi, UINT64_MAX));
      }
      if (timeline) tl = next;
      if (!timeline && mode != 5) CK(vkResetFences(dev, 1, &f));
      v[it] = now() - t0;
    }
    qsort(v, N, sizeof *v, cmpd);
    qsort(sub, N, sizeof *sub, cmpd);
    printf("%-34s round trip %8.2f us (p10 %7.2f, p90 %7.2f); vkQueueSubmit %6.2f us\n", names[mode],
           v[N / 2], v[N / 10], v[9 * N / 10], sub[N / 2]);
  }
  return 0;
}
