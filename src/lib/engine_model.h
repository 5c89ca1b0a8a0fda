/* The engine's model behind an open lingen_model, for the `lingen` command's reports of what the
 * public API leaves to the engine: info's weight layout and per-image memory of either attention,
 * --ceiling's arithmetic and state traffic. Not part of include/lingen.h, and not exported by
 * liblingen (its names are lingen_* only). */
#ifndef LINGEN_ENGINE_MODEL_H
#define LINGEN_ENGINE_MODEL_H
#include "lingen.h"
#include "engine/model.h"

/* Read only; valid until lingen_close(model). */
const Model *lib_engine_model(const lingen_model *model);
#endif
