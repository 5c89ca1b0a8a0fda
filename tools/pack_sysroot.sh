#!/usr/bin/env bash
# What a GPU machine without lingen's Debian libraries needs to build lingen there as a user
# does (make CUDA=1, its own compiler and -march=native): the headers and shared libraries of
# OpenBLAS, cJSON, libpng, giflib, zlib and stb_image_write, and the libraries they load (libgfortran...), into
# .dev/sysroot/{include,lib}, the big ones xz-compressed. There, tools/gpu_env.sh unpacks
# it and points CPATH, LIBRARY_PATH and LD_LIBRARY_PATH at it.
set -euo pipefail
cd "$(dirname "$0")/.."
out=.dev/sysroot
rm -rf "$out" && mkdir -p "$out/include/cjson" "$out/lib"
inc=/usr/include
multi=/usr/include/x86_64-linux-gnu
cp -L "$multi/cblas.h" "$multi/openblas_config.h" "$out/include/" 2> /dev/null || cp -L "$multi"/cblas*.h "$out/include/"
[ -e "$multi/openblas_config.h" ] && cp -L "$multi/openblas_config.h" "$out/include/"
cp -L "$inc/cjson/cJSON.h" "$out/include/cjson/"
cp -L "$inc/gif_lib.h" "$out/include/"
mkdir -p "$out/include/stb" && cp -L "$inc/stb/stb_image_write.h" "$out/include/stb/"
cp -L "$inc/png.h" "$inc/pngconf.h" "$inc/pnglibconf.h" "$inc/zlib.h" "$inc/zconf.h" "$out/include/" 2> /dev/null ||
    cp -L "$inc"/png*.h "$inc"/zlib.h "$multi"/zconf.h "$out/include/"
# the libraries lingen links (-l names) and what they load, glibc and the compiler's runtime apart
cache=$(ldconfig -p)
for lib in libopenblas.so.0 libcjson.so.1 libpng16.so.16 libgif.so.7 libz.so.1 libgfortran.so.5 libquadmath.so.0; do
    src=$(awk -v n="$lib" '$1 == n && /x86-64/ {print $NF; exit}' <<< "$cache")
    [ -n "$src" ] || { echo "pack_sysroot: $lib not found" >&2; exit 1; }
    cp -L "$src" "$out/lib/$lib"
done
ln -s libopenblas.so.0 "$out/lib/libopenblas.so"
ln -s libcjson.so.1 "$out/lib/libcjson.so"
ln -s libpng16.so.16 "$out/lib/libpng.so"
ln -s libz.so.1 "$out/lib/libz.so"
ln -s libgif.so.7 "$out/lib/libgif.so"
xz -T2 -6 -f "$out/lib/libopenblas.so.0" "$out/lib/libgfortran.so.5"
du -sh "$out"
