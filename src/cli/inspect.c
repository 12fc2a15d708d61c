/* inspect.c — `agrl inspect FILE`: what an agrl file holds.
 *
 * Reads the header of any file agrl writes through the container's reader
 * (base/agfile.h), which checks it whole, and prints its format, its kind,
 * every key with its type and value, and the section table (name, dtype,
 * shape, bytes, offset). An agent's file holds its replay table after its
 * container, as a container of its own, and so do a shard's file and a
 * frame table's (its fields' table after its frames): that
 * one is printed after it; a DQN's frame table is followed by its fields'
 * table, printed last. A file of agrl 0.1.0 prints its format's name;
 * those the container's reader parses (models, replay tables, DQN and
 * SAC/TD3 agents, shards) print their keys and sections as their loaders
 * see them. An agent's run state (the section run_state) that is a
 * training loop's (kind "run", or its record of 0.1.0) is printed as well.
 * Nothing but the headers and that section is read, nothing is allocated
 * on a device.
 */
#include <stdio.h>
#include <stdlib.h>
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
          "table, an agent, a shard or a checkpoint's cli state, of this release\n"
          "or of agrl 0.1.0.\n");
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

/* The section run_state of an agent's container, read whole (CRC checked). */
typedef struct run_blob {
  int sec;
  unsigned char *b;
} run_blob;

static ag_status take_run(void *user, int sec, unsigned char *buf, uint64_t off, size_t len) {
  run_blob *r = user;
  if (sec == r->sec) memcpy(r->b + off, buf, len);
  return AG_OK;
}

/* Reads an agent's run state into *out (ag__agf_init'd) when it is a
 * training loop's; *bytes: its length (0: none). A run state of other
 * bytes (the caller's own) is not an error, nor one that begins as a
 * loop's but does not read as one (why says what is wrong). */
static ag_status read_run_state(const ag__agf *a, FILE *f, const char *path, ag__agf *out, uint64_t *bytes,
                                char *why, size_t why_len) {
  *bytes = 0;
  why[0] = 0;
  const int sec = ag__agf_section_find(a, "run_state");
  if (sec < 0 || a->sections[sec].bytes == 0) return AG_OK;
  *bytes = a->sections[sec].bytes;
  if (*bytes < 8 || *bytes > ((uint64_t)1 << 30)) return AG_OK;
  run_blob r = {sec, malloc((size_t)*bytes)};
  if (!r.b) return ag__fail(AG_ERR_OUT_OF_MEMORY, "agrl inspect: out of host memory");
  ag_status s = ag__agf_stream(a, f, take_run, &r, "agrl inspect", path);
  if (!s && (!memcmp(r.b, "AGRLFILE", 8) || !memcmp(r.b, "AGRLRUN", 7))) {
    FILE *m = fmemopen(r.b, (size_t)*bytes, "rb");
    if (!m) {
      s = ag__fail(AG_ERR_OUT_OF_MEMORY, "agrl inspect: out of host memory");
    } else {
      /* a run state the loop would refuse is the resume's to report: said, not refused here */
      if (ag__agf_read(out, m, *bytes, "agrl inspect", "its run state")) {
        snprintf(why, why_len, "%s", ag_last_error());
        ag_clear_error();
        ag__agf_free(out);
      }
      fclose(m);
    }
    const ag__agf_key *k = s ? NULL : ag__agf_key_find(out, "kind");
    if (!s && out->n_keys && (!k || k->type != AG__AGF_STR || strcmp(k->data, "run"))) ag__agf_free(out);
  }
  free(r.b);
  return s;
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
  ag__agf a, t, run;
  ag__agf_init(&t);
  ag__agf_init(&run);
  uint64_t run_bytes = 0;
  char run_why[512] = "";
  uint64_t left = 0;
  s = ag__stream_left(f, "agrl inspect", path, "an agrl file", &left);
  if (!s) s = ag__agf_read_head(&a, f, left, "agrl inspect", path);
  const ag__agf_key *kind = s ? NULL : ag__agf_key_find(&a, "kind");
  const char *kd = kind && kind->type == AG__AGF_STR ? (const char *)kind->data : "";
  /* an agent's replay table follows its container, a shard's local table its header, and a
   * frame table's fields' table its frames */
  int agent = !strcmp(kd, "dqn") || !strcmp(kd, "ac") || !strcmp(kd, "shard") || !strcmp(kd, "frames");
  if (!s && !agent && a.total != left) { /* the whole-file reader says what follows */
    ag__agf_free(&a);
    s = fseeko(f, 0, SEEK_SET) ? ag__fail(AG_ERR_IO, "agrl inspect: %s: cannot seek", path)
                               : ag__agf_read(&a, f, left, "agrl inspect", path);
  }
  if (!s && agent) s = read_run_state(&a, f, path, &run, &run_bytes, run_why, sizeof run_why);
  /* a DQN's frame table is itself a frame table's image: its frames, then its fields' table */
  ag__agf u;
  ag__agf_init(&u);
  int nested = 0;
  if (!s && agent) {
    if (fseeko(f, a.base + (off_t)a.total, SEEK_SET))
      s = ag__fail(AG_ERR_IO, "agrl inspect: %s: cannot seek to its replay table", path);
    else
      s = ag__agf_read_head(&t, f, left - a.total, "agrl inspect", path);
    const ag__agf_key *tk = s ? NULL : ag__agf_key_find(&t, "kind");
    nested = !strcmp(kd, "dqn") && tk && tk->type == AG__AGF_STR && !strcmp((const char *)tk->data, "frames");
    const uint64_t rest = s ? 0 : left - a.total - t.total;
    if (!s && nested && fseeko(f, t.base + (off_t)t.total, SEEK_SET))
      s = ag__fail(AG_ERR_IO, "agrl inspect: %s: cannot seek to its frame table's fields", path);
    else if (!s && nested)
      s = ag__agf_read(&u, f, rest, "agrl inspect", path);
    else if (!s) /* the whole rest of the file */
      s = ag__agf_check_length(left - a.total, t.total, 0, "agrl inspect", path);
  }
  fclose(f);
  if (s) {
    ag__agf_free(&a);
    ag__agf_free(&t);
    ag__agf_free(&u);
    ag__agf_free(&run);
    fprintf(stderr, "%s\n", ag_last_error());
    return 1;
  }
  printf("file: %s\n", path);
  print_form(&a);
  if (agent) {
    printf("then, from byte %llu: its %s table\n", (unsigned long long)a.total, nested ? "frame" : "replay");
    print_form(&t);
  }
  if (nested) {
    printf("then, from byte %llu: its frame table's fields\n", (unsigned long long)(a.total + t.total));
    print_form(&u);
  }
  if (run.n_keys) {
    printf("and, in its section run_state: a training loop's run state\n");
    print_form(&run);
  } else if (run_why[0]) {
    printf("its run_state: %llu bytes, not a sound training loop's run state: %s\n",
           (unsigned long long)run_bytes, run_why);
  } else if (run_bytes) {
    printf("its run_state: %llu bytes of the caller's (not a training loop's run state)\n",
           (unsigned long long)run_bytes);
  }
  ag__agf_free(&a);
  ag__agf_free(&t);
  ag__agf_free(&u);
  ag__agf_free(&run);
  return 0;
}
