# Sourced on a GPU machine, from the repository root, before building and testing lingen there
# (the machine keeps /root/lingen-dev while it is held, so calls can bring the models in parts):
#   .dev/sysroot  (tools/pack_sysroot.sh)  unpacked once into /root/lingen-dev/sysroot
#   .dev/carry*/models/*.bin, .dev/carry*/data/...  added to /root/lingen-dev/{models,data}
# Then models/ links to every model there, LINGEN_DATA points at the data, and the compiler and
# loader find the libraries (CPATH, LIBRARY_PATH, LD_LIBRARY_PATH): `make CUDA=1` builds as is.
keep=/root/lingen-dev
mkdir -p "$keep/models" "$keep/data"
if [ -d .dev/sysroot ] && [ ! -e "$keep/sysroot/.ok" ]; then
    rm -rf "$keep/sysroot" && cp -a .dev/sysroot "$keep/sysroot"
    for f in "$keep"/sysroot/lib/*.xz; do
        xz -d -f "$f" 2> /dev/null || python3 -c "import lzma,sys; open(sys.argv[1][:-3],'wb').write(lzma.open(sys.argv[1]).read())" "$f" && rm -f "$f"
    done
    touch "$keep/sysroot/.ok"
fi
for c in .dev/carry*; do
    [ -d "$c/models" ] && cp -a "$c/models/." "$keep/models/"
    [ -d "$c/data" ] && cp -a "$c/data/." "$keep/data/"
done
for m in "$keep"/models/*.bin; do [ -e "$m" ] && ln -sf "$m" "models/$(basename "$m")"; done
export CPATH=$keep/sysroot/include LIBRARY_PATH=$keep/sysroot/lib LD_LIBRARY_PATH=$keep/sysroot/lib
export LINGEN_DATA=$keep/data
echo "gpu_env: models $(cd "$keep/models" && echo *.bin); data $(cd "$keep/data" && find . -type f | tr '\n' ' ')"
