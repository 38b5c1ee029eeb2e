#!/usr/bin/env python3
# tests/tools/check_layers.py — the layers of src/ hold: every #include "folder/..." in a source
# file names a header of the file's own layer or of a layer it declares (src/layers.cmake, written
# by CMake to <build>/layers.txt), and the declared dependencies form a DAG.
#
# usage: check_layers.py <build>/layers.txt <src dir>
# A file belongs to the deepest declared layer folder that contains it (src/backend/cpu/x.cpp to
# backend/cpu, src/backend/x.cpp to backend). An include belongs to the layer of the header it
# names. An include of another layer that is not a declared dependency fails. Prints every
# violation with file:line; exit status 1 if any.
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_SUFFIXES = ('.cpp', '.hpp', '.h', '.c', '.cc')


def read_layers(path):
    """{folder: deps} in declaration order (bottom to top)."""
    layers = {}
    with open(path, encoding='utf-8') as f:
        for line in f:
            line = line.rstrip('\n')
            if not line:
                continue
            folder, deps = line.split('|')
            layers[folder] = deps.split()
    return layers


def layer_of(path, layers):
    """The deepest declared layer whose folder contains `path` (relative to src/), or None."""
    parts = path.split('/')[:-1]
    while parts:
        folder = '/'.join(parts)
        if folder in layers:
            return folder
        parts.pop()
    return None


def find_cycle(layers):
    """A dependency cycle as a list of layers, or None."""
    state = {}  # folder → 1 while on the DFS stack, 2 when done

    def visit(folder, stack):
        state[folder] = 1
        stack.append(folder)
        for dep in layers[folder]:
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep]
            if dep not in state:
                cycle = visit(dep, stack)
                if cycle:
                    return cycle
        stack.pop()
        state[folder] = 2
        return None

    for folder in layers:
        if folder not in state:
            cycle = visit(folder, [])
            if cycle:
                return cycle
    return None


def check(layers_txt, src):
    layers = read_layers(layers_txt)
    errors = []
    for folder, deps in layers.items():
        for dep in deps:
            if dep not in layers:
                errors.append(f'{layers_txt}: layer {folder} depends on {dep}, which is not a layer')
            elif dep == folder:
                errors.append(f'{layers_txt}: layer {folder} depends on itself')
    cycle = find_cycle({f: tuple(d for d in deps if d in layers and d != f) for f, deps in layers.items()})
    if cycle:
        errors.append(f'{layers_txt}: the layers form a cycle: {" -> ".join(cycle)}')

    for root, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith(SOURCE_SUFFIXES):
                continue
            full = os.path.join(root, name)
            rel = os.path.relpath(full, src).replace(os.sep, '/')
            own = layer_of(rel, layers)
            if own is None:
                errors.append(f'src/{rel}: its folder is no layer (declare it with sheaf_layer in src/layers.cmake)')
                continue
            deps = layers[own]
            with open(full, encoding='utf-8', errors='replace') as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m or '/' not in m.group(1):
                        continue
                    header = m.group(1)
                    target = layer_of(header, layers)
                    if target is None or target == own or target in deps:
                        continue
                    errors.append(f'src/{rel}:{number}: layer {own} includes "{header}" of layer {target}, '
                                  f'which is not among its dependencies ({" ".join(deps) or "none"}) '
                                  f'in src/layers.cmake')
    return errors


def main():
    if len(sys.argv) != 3:
        print('usage: check_layers.py <build>/layers.txt <src dir>', file=sys.stderr)
        return 2
    errors = check(sys.argv[1], sys.argv[2])
    for e in errors:
        print(e)
    if errors:
        print(f'{len(errors)} layer violation(s); the layers are declared in src/layers.cmake '
              f'and drawn in docs/architecture.md')
        return 1
    print(f'layers hold: {sum(1 for _ in read_layers(sys.argv[1]))} layers, no cycle, every include allowed')
    return 0


if __name__ == '__main__':
    sys.exit(main())
