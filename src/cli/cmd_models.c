/* lingen models: the models that --model NAME finds, and where it looks (modelpath.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "commands.h"
#include "io/modelpath.h"
#include "io/safetensors.h"

/* The directories searched, in order, each with why and whether it is there. */
static void print_dirs(void) {
    ModelDirs d;
    modelpath_dirs(&d);
    printf("searched, in order:\n");
    for (int i = 0; i < d.n; i++) {
        struct stat st;
        char *dir = text_escape(d.dir[i]);   /* names and values are the files' text: no terminal escapes */
        printf("  %s (%s)%s\n", dir, d.why[i], stat(d.dir[i], &st) ? ": not there" : "");
        free(dir);
    }
    modelpath_dirs_free(&d);
}

/* A model's row: from its file's header alone, listed even when unreadable (--model NAME would
 * pick it). */
static void print_model(const ModelEntry *v) {
    SafeTensors st;
    Err e;
    char *name = text_escape(v->name), *file = text_escape(v->path);
    if (st_open_header(&st, v->path, &e)) {
        char *why = text_escape(e.msg);
        printf("%-16s (unreadable: %s)\n", name, why);
        free(why);
    } else {
        const char *dataset = st_meta(&st, "dataset"), *attn = st_meta(&st, "attention");
        const char *bpd = st_meta(&st, "test_bits_per_dim"), *imgs = st_meta(&st, "test_images");
        char bits[64], set[16], kind[16];
        if (!bpd) snprintf(bits, sizeof bits, "-");
        else if (imgs && strcmp(imgs, "10000")) snprintf(bits, sizeof bits, "%.10s (%.8s images)", bpd, imgs);
        else snprintf(bits, sizeof bits, "%.10s", bpd);
        snprintf(set, sizeof set, "%.8s", dataset ? dataset : "?");
        snprintf(kind, sizeof kind, "%.9s", attn ? attn : "?");
        char *bits_s = text_escape(bits), *set_s = text_escape(set), *kind_s = text_escape(kind);
        printf("%-16s %-8s %-9s %-10s %6.1f MB  %s\n", name, set_s, kind_s, bits_s, st.len / 1e6, file);
        free(bits_s);
        free(set_s);
        free(kind_s);
        st_close(&st);
    }
    free(name);
    free(file);
}

int cmd_models(int argc, char **argv) {
    int r = args_parse(argc, argv, 2, NULL, 0, "models",
                       "List the models that --model NAME finds: name, dataset, attention, bits/dim on the\n"
                       "full test set (as recorded in the file when it was made), size and file. The\n"
                       "directories searched, in order (the first of a name wins):\n"
                       "  $LINGEN_MODELS (directories separated by ':'), ./models, models/ next to the\n"
                       "  executable, ../share/lingen/models from the executable, and the directory\n"
                       "  `make install` put the models in.",
                       NULL, 0, NULL);
    if (r) return r < 0 ? EXIT_OK : r;
    print_dirs();
    ModelEntry *v;
    int n = modelpath_list(&v);
    if (n == 0) {
        printf("no models found: set LINGEN_MODELS to a directory of model files\n");
        free(v);
        return EXIT_OK;
    }
    printf("\n%-16s %-8s %-9s %-10s %9s  %s\n", "NAME", "DATASET", "ATTENTION", "BITS/DIM", "SIZE", "FILE");
    for (int i = 0; i < n; i++) print_model(&v[i]);
    char *first = text_escape(v[0].name);
    printf("\nuse one with --model NAME, e.g. lingen sample --model %s\n", first);
    free(first);
    free(v);
    return EXIT_OK;
}
