#!/usr/bin/env bash
# `make images`: builds the svc, svc-caddy and svc-caddy-dns images for linux/amd64 and linux/arm64
# with podman, FROM scratch, from root filesystems assembled here out of what the build fetches
# anyway (nothing is pulled from a container registry):
#   - Node 24: the npm registry's node-linux-<arch> package (the one scripts/node-env.sh installs);
#   - workerd and esbuild: their npm platform packages (@cloudflare/workerd-linux-*, @esbuild/linux-*);
#   - Caddy with the svc modules: Go, cross-compiled, CGO_ENABLED=0 (static);
#   - cell-front, the resident part of `cell serve` (runtime/front/): the same, through
#     scripts/build-front.sh, at /opt/svc/runtime/bin/cell-front beside the runtime/bin/cell it
#     serves for (the checkout's own build is left out: it is this machine's architecture);
#   - shared libraries: the host's for amd64 (found with ldd), Debian's arm64 .debs for arm64;
#   - busybox-static (Debian) for /usr/bin/env and /bin/sh: svc starts `runtime/bin/cell`, a
#     `#!/usr/bin/env node` script.
# Downloads and Go builds are cached under .tools/images/. Usage: build.sh [amd64] [arm64];
# IMAGES="svc svc-caddy svc-caddy-dns" (the default) chooses which images.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
here="$root/packaging/images"
cache="$root/.tools/images"
arches=("$@")
[ ${#arches[@]} -gt 0 ] || arches=(amd64 arm64)
images=" ${IMAGES:-svc svc-caddy svc-caddy-dns} "
mkdir -p "$cache"/{npm,debs,caddy,front}

say() { echo "images: $*" >&2; }
json_field() { sed -n "s/^  \"$2\": \"\\([^\"]*\\)\".*/\\1/p" "$1" | head -1; }
version="$(json_field "$root/package.json" version)"
node_version="$(json_field "$root/.tools/node24/node/package.json" version)"
workerd_version="$(json_field "$root/node_modules/workerd/package.json" version)"
esbuild_version="$(json_field "$root/node_modules/esbuild/package.json" version)"
host_arch="$(dpkg --print-architecture)"

npm_arch() { [ "$1" = amd64 ] && echo x64 || echo "$1"; }
workerd_arch() { [ "$1" = amd64 ] && echo 64 || echo "$1"; }

# npm_tarball <package> <version>: the package's tarball in the cache (npm pack fetches it once).
npm_tarball() {
  local name="$1" ver="$2" file
  file="$cache/npm/$(echo "${name#@}" | tr / -)-$ver.tgz"
  if [ ! -f "$file" ]; then
    say "fetching $name@$ver from the npm registry"
    (cd "$cache/npm" && "$root/scripts/with-node" npm pack --silent "$name@$ver" >/dev/null)
  fi
  echo "$file"
}

# deb <package:arch>: the Debian package in the cache (apt-get download fetches it once).
deb() {
  local spec="$1" arch="${1#*:}" dir
  dir="$cache/debs/$arch"
  mkdir -p "$dir"
  if ! compgen -G "$dir/${spec%%:*}_*.deb" >/dev/null; then
    if [ "$arch" != "$host_arch" ] && ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
      say "adding the $arch architecture to apt"
      dpkg --add-architecture "$arch"
      apt-get update -qq
    fi
    say "fetching $spec (apt-get download)"
    # To stderr: the caller takes this function's stdout as the file's path.
    (cd "$dir" && apt-get download "$spec" 2>/dev/null || { apt-get update -qq && apt-get download "$spec"; }) >&2
  fi
  compgen -G "$dir/${spec%%:*}_*.deb" | head -1
}

# caddy_binary <arch> <name>: the adapter for that architecture, static, rebuilt when adapter/ changed.
caddy_binary() {
  local arch="$1" name="$2" out="$cache/caddy/$1/$2"
  mkdir -p "$(dirname "$out")"
  if [ ! -x "$out" ] || [ -n "$(find "$root/adapter" -type f -newer "$out" -print -quit)" ]; then
    say "building $name for linux/$arch (Go, CGO_ENABLED=0; the first build takes minutes)"
    (cd "$root/adapter" && CGO_ENABLED=0 GOOS=linux GOARCH="$arch" GOFLAGS=-buildvcs=false \
      go build -ldflags="-s -w" -o "$out.tmp" "./cmd/$name")
    mv -f "$out.tmp" "$out"
  fi
  echo "$out"
}

# front_binary <arch>: cell-front for that architecture, static, rebuilt when runtime/front/ changed.
front_binary() {
  local arch="$1" out="$cache/front/$1/cell-front"
  mkdir -p "$(dirname "$out")"
  if [ ! -x "$out" ] || [ -n "$(find "$root/runtime/front" "$root/scripts/build-front.sh" -newer "$out" -print -quit)" ]; then
    say "building cell-front for linux/$arch (Go, CGO_ENABLED=0)"
    GOOS=linux GOARCH="$arch" "$root/scripts/build-front.sh" "$out"
  fi
  echo "$out"
}

# base_files <rootfs>: users, CA certificates, /tmp, busybox as env and sh.
base_files() {
  local fs="$1" arch="$2"
  mkdir -p "$fs"/{etc/ssl/certs,tmp,bin,usr/bin}
  chmod 1777 "$fs/tmp"
  printf 'root:x:0:0:root:/root:/bin/sh\nsvc:x:10001:10001:svc:/var/lib/svc:/bin/sh\n' >"$fs/etc/passwd"
  printf 'root:x:0:\nsvc:x:10001:\n' >"$fs/etc/group"
  cp -L /etc/ssl/certs/ca-certificates.crt "$fs/etc/ssl/certs/"
  dpkg-deb --fsys-tarfile "$(deb "busybox-static:$arch")" | tar -x -C "$fs" ./bin/busybox
  ln -sf busybox "$fs/bin/sh"
  ln -sf ../../bin/busybox "$fs/usr/bin/env"
}

# shared_libraries <rootfs> <arch> <binary>...: what the dynamic binaries load, at the same paths.
shared_libraries() {
  local fs="$1" arch="$2"
  shift 2
  if [ "$arch" = "$host_arch" ]; then
    ldd "$@" | awk '/=> \//{print $3} /^\t\/lib/{print $1}' | sort -u | while read -r lib; do
      cp -L --parents "$lib" "$fs/"
    done
  else
    for pkg in libc6 libstdc++6 libgcc-s1; do
      dpkg-deb -x "$(deb "$pkg:$arch")" "$fs"
    done
    rm -rf "$fs/usr/lib/gcc" "$fs/usr/share" "$fs/usr/libexec" "$fs/usr/bin/ldd" "$fs/sbin"
  fi
}

# The app's files and its production node_modules, with the platform packages for <arch>.
svc_tree() {
  local fs="$1" arch="$2" app="$1/opt/svc"
  mkdir -p "$app"
  tar -C "$root" --exclude='*.test.ts' --exclude=runtime/front --exclude=runtime/bin/cell-front \
    -cf - bin src runtime package.json package-lock.json README.md |
    tar -C "$app" -xf -
  [ -f "$app/bin/svc" ] || { say "copying the svc tree failed"; exit 1; }
  install -m 0755 "$(front_binary "$arch")" "$app/runtime/bin/cell-front"
  local modules="$cache/node_modules-prod"
  if [ ! -f "$modules/.stamp" ] || [ "$root/package-lock.json" -nt "$modules/.stamp" ]; then
    say "pruning node_modules to production dependencies (cached in $modules)"
    rm -rf "$modules"
    mkdir -p "$modules"
    cp "$root/package.json" "$root/package-lock.json" "$modules/"
    cp -a "$root/node_modules" "$modules/node_modules"
    (cd "$modules" && "$root/scripts/with-node" npm prune --omit=dev --no-audit --no-fund --loglevel=error >&2)
    touch "$modules/.stamp"
  fi
  cp -a "$modules/node_modules" "$app/node_modules"
  if [ "$arch" != amd64 ]; then
    local mods="$app/node_modules"
    rm -rf "$mods/@cloudflare/workerd-linux-64" "$mods/@esbuild/linux-x64"
    mkdir -p "$mods/@cloudflare/workerd-linux-$(workerd_arch "$arch")" "$mods/@esbuild/linux-$(npm_arch "$arch")"
    tar -xzf "$(npm_tarball "@cloudflare/workerd-linux-$(workerd_arch "$arch")" "$workerd_version")" \
      -C "$mods/@cloudflare/workerd-linux-$(workerd_arch "$arch")" --strip-components=1
    tar -xzf "$(npm_tarball "@esbuild/linux-$(npm_arch "$arch")" "$esbuild_version")" \
      -C "$mods/@esbuild/linux-$(npm_arch "$arch")" --strip-components=1
    # Both packages' installers put the native binary over their JavaScript launcher on install
    # (as a hard link, which keeps the image from holding it twice).
    ln -f "$mods/@cloudflare/workerd-linux-$(workerd_arch "$arch")/bin/workerd" "$mods/workerd/bin/workerd"
    ln -f "$mods/@esbuild/linux-$(npm_arch "$arch")/bin/esbuild" "$mods/esbuild/bin/esbuild"
  fi
  mkdir -p "$fs/usr/local/bin"
  ln -sf ../../../opt/svc/bin/svc "$fs/usr/local/bin/svc"
  local tmp
  tmp="$(mktemp -d)"
  tar -xzf "$(npm_tarball "node-linux-$(npm_arch "$arch")" "$node_version")" -C "$tmp" package/bin/node
  mv "$tmp/package/bin/node" "$fs/usr/local/bin/node"
  rm -rf "$tmp"
}

# tag_suffix <arch>: the host architecture's images carry the plain tags, the other one `-<arch>`.
tag_suffix() { [ "$1" = "$host_arch" ] && echo "" || echo "-$1"; }

podman_build() { # podman_build <arch> <containerfile> <context> <image> [build-arg...]
  local arch="$1" file="$2" context="$3" image="$4" suffix
  shift 4
  suffix="$(tag_suffix "$arch")"
  local tags=()
  for tag in latest "$version" edge; do
    case "$image" in
      *-dns) tags+=(-t "${image%-dns}:$tag-dns$suffix") ;; # the flavour is a tag suffix of svc-caddy
      *) tags+=(-t "$image:$tag$suffix") ;;
    esac
  done
  say "podman build ${tags[*]} (linux/$arch)"
  podman build -q --format docker --platform "linux/$arch" --build-arg "VERSION=$version" "$@" \
    "${tags[@]}" -f "$file" "$context" >/dev/null
}

for arch in "${arches[@]}"; do
  work="$cache/work/$arch"
  rm -rf "$work"
  mkdir -p "$work"

  if [[ "$images" == *" svc "* ]]; then
  say "assembling svc for linux/$arch"
  fs="$work/svc/rootfs"
  base_files "$fs" "$arch"
  svc_tree "$fs" "$arch"
  mkdir -p "$fs/var/lib" "$work/svc/state"
  chmod 0700 "$work/svc/state"
  shared_libraries "$fs" "$arch" "$fs/usr/local/bin/node" "$fs/opt/svc/node_modules/workerd/bin/workerd"
  podman_build "$arch" "$here/svc.Containerfile" "$work/svc" svc
  fi

  for flavour in svc-caddy svc-caddy-dns; do
    [[ "$images" == *" $flavour "* ]] || continue
    say "assembling $flavour for linux/$arch"
    fs="$work/$flavour/rootfs"
    base_files "$fs" "$arch"
    install -m 0755 "$(caddy_binary "$arch" "$flavour")" "$fs/usr/bin/svc-caddy"
    setcap cap_net_bind_service=+ep "$fs/usr/bin/svc-caddy"
    mkdir -p "$fs/etc/caddy" "$work/$flavour/state"
    cp "$root/adapter/Caddyfile" "$fs/etc/caddy/Caddyfile"
    podman_build "$arch" "$here/caddy.Containerfile" "$work/$flavour" "$flavour" --build-arg "FLAVOUR=$flavour"
  done
done
say "built: $(podman images --format '{{.Repository}}:{{.Tag}}' | grep -E '/(svc|svc-caddy):' | sort | tr '\n' ' ')"
