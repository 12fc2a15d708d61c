/* inspect.c — `agrl inspect FILE`: what an agrl file holds.
 *
 * Reads the header of any file agrl writes through the container's reader
 * (base/agfile.h), which checks it whole, and prints its format, its kind,
 * every key with its type and value, and the section table (name, dtype,
 * shape, bytes, offset). An agent's file holds its replay table after its
 * container, as a container of its own, and so does a shard's file: that
 * one is printed after it. A file of agrl 0.1.0 prints its format's name;
 * those the container's reader parses (models, replay tables, DQN and
 * SAC/TD3 agents, shards) print their keys and sections as their loaders
 * see them. Nothing but the headers is read, nothing is allocated on a
 * device.
 */
#include <stdio.h>
#include <string.h>

#include "agrl/agrl.h"
#include "base/agfile.h"

int agrl_cmd_inspect(int argc, char **argv);

static void usage(FILE *f) {
  fprintf(f,
          "usage: agrl inspect FILE\n"
          "\n"
          "Prints the format, the kind, the metadata keys and the section table\n"
          "(name, dtype, shape, bytes, offset) of an agrl file: a model, a replay\n"
          "table, an agent or a shard, of this release or of agrl 0.1.0.\n");
}

static void print_value(const ag__agf_key *k) {
  switch (k->type) {
    case AG__AGF_U64: printf("u64       %llu", (unsigned long long)k->v.u); break;
    case AG__AGF_I64: printf("i64       %lld", (long long)k->v.i); break;
    case AG__AGF_F64: printf("f64       %.17g", k->v.f); break;
    case AG__AGF_STR: printf("string    \"%s\"", (const char *)k->data); break;
    case AG__AGF_I64S:
    case AG__AGF_F64S: {
      char t[24];
      snprintf(t, sizeof t, "%s[%u]", k->type == AG__AGF_I64S ? "i64" : "f64", k->count);
      printf("%-9s", t);
      uint32_t shown = k->count < 16 ? k->count : 16;
      for (uint32_t i = 0; i < shown; i++) {
        if (k->type == AG__AGF_I64S)
          printf(" %lld", (long long)((const int64_t *)k->data)[i]);
        else
          printf(" %.17g", ((const double *)k->data)[i]);
      }
      if (shown < k->count) printf(" ...");
      break;
    }
  }
  printf("\n");
}

static void print_form(const ag__agf *a) {
  const ag__agf_key *kind = ag__agf_key_find(a, "kind");
  printf("format: %s\n", a->format);
  printf("kind: %s\n", kind && kind->type == AG__AGF_STR ? (const char *)kind->data : "(none)");
  printf("bytes: %llu, part length %llu\n", (unsigned long long)a->total, (unsigned long long)a->part);
  printf("keys (%d):\n", a->n_keys);
  for (int i = 0; i < a->n_keys; i++) {
    printf("  %-28s ", a->keys[i].name);
    print_value(&a->keys[i]);
  }
  printf("sections (%d):\n", a->n_sections);
  printf("  %-20s %-6s %-24s %14s %14s\n", "name", "dtype", "shape", "bytes", "offset");
  for (int i = 0; i < a->n_sections; i++) {
    const ag__agf_section *s = &a->sections[i];
    char shape[64] = "blob";
    if (s->kind == AG__AGF_TENSOR) {
      size_t at = 0;
      shape[at++] = '[';
      for (int d = 0; d < s->ndim && at < sizeof shape; d++)
        at += (size_t)snprintf(shape + at, sizeof shape - at, "%s%lld", d ? ", " : "", (long long)s->dims[d]);
      if (at < sizeof shape - 1) shape[at++] = ']', shape[at] = 0;
    }
    printf("  %-20s %-6s %-24s %14llu %14llu\n", s->name,
           s->kind == AG__AGF_TENSOR ? ag__agf_dtype_name(s->dtype) : "u8", shape,
           (unsigned long long)s->bytes, (unsigned long long)s->offset);
  }
}

int agrl_cmd_inspect(int argc, char **argv) {
  if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    usage(stdout);
    return 0;
  }
  if (argc != 2 || argv[1][0] == '-') {
    fprintf(stderr, "agrl inspect: %s\n", argc < 2 ? "give one FILE" : "give one FILE and no options");
    usage(stderr);
    return 2;
  }
  const char *path = argv[1];
  FILE *f;
  ag_status s = ag__open_read(path, "agrl inspect", &f);
  if (s) {
    fprintf(stderr, "%s\n", ag_last_error());
    return 1;
  }
  ag__agf a, t;
  ag__agf_init(&t);
  uint64_t left = 0;
  s = ag__stream_left(f, "agrl inspect", path, "an agrl file", &left);
  if (!s) s = ag__agf_read_head(&a, f, left, "agrl inspect", path);
  const ag__agf_key *kind = s ? NULL : ag__agf_key_find(&a, "kind");
  const char *kd = kind && kind->type == AG__AGF_STR ? (const char *)kind->data : "";
  /* an agent's replay table follows its container, and a shard's local table its header */
  int agent = !strcmp(kd, "dqn") || !strcmp(kd, "ac") || !strcmp(kd, "shard");
  if (!s && !agent && a.total != left) { /* the whole-file reader says what follows */
    ag__agf_free(&a);
    s = fseeko(f, 0, SEEK_SET) ? ag__fail(AG_ERR_IO, "agrl inspect: %s: cannot seek", path)
                               : ag__agf_read(&a, f, left, "agrl inspect", path);
  }
  if (!s && agent) {
    if (fseeko(f, a.base + (off_t)a.total, SEEK_SET))
      s = ag__fail(AG_ERR_IO, "agrl inspect: %s: cannot seek to its replay table", path);
    else
      s = ag__agf_read(&t, f, left - a.total, "agrl inspect", path);
  }
  fclose(f);
  if (s) {
    ag__agf_free(&a);
    ag__agf_free(&t);
    fprintf(stderr, "%s\n", ag_last_error());
    return 1;
  }
  printf("file: %s\n", path);
  print_form(&a);
  if (agent) {
    printf("then, from byte %llu: its replay table\n", (unsigned long long)a.total);
    print_form(&t);
  }
  ag__agf_free(&a);
  ag__agf_free(&t);
  return 0;
}
