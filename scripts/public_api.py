#!/usr/bin/env python3
"""Renders a library's public API from its rustdoc JSON, one item a line.

Usage: public_api.py CRATE.json > listing.txt

Every public item reachable from the crate root (through modules and
re-exports) is listed under each public path, with its signature: functions
and methods with their parameters and return type, struct fields, enum
variants, trait impls (auto traits such as Send and Sync included, blanket
impls left out), constants and type aliases. Lines are sorted, so the listing
changes only when the API does. Used by scripts/public-api.sh.
"""
import json
import sys


# Auto traits that only the standard library can name.
UNSTABLE_AUTO_TRAITS = {"Freeze"}


class Api:
    def __init__(self, doc):
        self.index = doc["index"]
        self.paths = doc["paths"]
        self.root = str(doc["root"])
        self.lines = set()
        self.seen = set()
        # id -> the shortest public path it is reachable by (first pass).
        self.public = {}

    # ------------------------------------------------------------ types

    def path_of(self, rpath):
        """The public path of a resolved path: how users name it, not
        where it is defined, so moving code between private modules
        does not change the listing."""
        public = self.public.get(rpath.get("id"))
        if public:
            return public
        entry = self.paths.get(str(rpath.get("id")))
        if entry:
            return "::".join(entry["path"])
        return rpath["path"]

    def args(self, args):
        if not args:
            return ""
        if "angle_bracketed" in args:
            parts = []
            for a in args["angle_bracketed"]["args"]:
                if "type" in a:
                    parts.append(self.ty(a["type"]))
                elif "lifetime" in a:
                    parts.append(a["lifetime"])
                elif "const" in a:
                    parts.append(a["const"].get("expr", "_"))
                else:
                    parts.append("_")
            for c in args["angle_bracketed"].get("constraints", []):
                binding = c.get("binding", {})
                if "equality" in binding:
                    value = binding["equality"]
                    value = self.ty(value["type"]) if "type" in value else str(value)
                    parts.append(f"{c['name']} = {value}")
                else:
                    parts.append(f"{c['name']}: {self.bounds(binding.get('constraint', []))}")
            return "<" + ", ".join(parts) + ">" if parts else ""
        if "parenthesized" in args:
            p = args["parenthesized"]
            out = "(" + ", ".join(self.ty(t) for t in p["inputs"]) + ")"
            if p.get("output"):
                out += " -> " + self.ty(p["output"])
            return out
        return ""

    def bounds(self, bounds):
        parts = []
        for b in bounds:
            if "trait_bound" in b:
                tb = b["trait_bound"]
                modifier = "?" if tb.get("modifier") == "maybe" else ""
                parts.append(modifier + self.path_of(tb["trait"]) + self.args(tb["trait"].get("args")))
            elif "outlives" in b:
                parts.append(b["outlives"])
            else:
                parts.append(json.dumps(b, sort_keys=True))
        return " + ".join(parts)

    def ty(self, t):
        if t is None:
            return "()"
        kind, v = next(iter(t.items()))
        if kind == "resolved_path":
            return self.path_of(v) + self.args(v.get("args"))
        if kind == "primitive":
            return v
        if kind == "generic":
            return v
        if kind == "borrowed_ref":
            life = v["lifetime"] + " " if v.get("lifetime") else ""
            mut = "mut " if v["is_mutable"] else ""
            return f"&{life}{mut}{self.ty(v['type'])}"
        if kind == "raw_pointer":
            return ("*mut " if v["is_mutable"] else "*const ") + self.ty(v["type"])
        if kind == "tuple":
            return "(" + ", ".join(self.ty(x) for x in v) + ("," if len(v) == 1 else "") + ")"
        if kind == "slice":
            return f"[{self.ty(v)}]"
        if kind == "array":
            return f"[{self.ty(v['type'])}; {v['len']}]"
        if kind == "impl_trait":
            return "impl " + self.bounds(v)
        if kind == "dyn_trait":
            traits = " + ".join(self.path_of(p["trait"]) + self.args(p["trait"].get("args")) for p in v["traits"])
            life = " + " + v["lifetime"] if v.get("lifetime") else ""
            return f"dyn {traits}{life}"
        if kind == "qualified_path":
            trait = v.get("trait")
            self_ty = self.ty(v["self_type"])
            if trait:
                return f"<{self_ty} as {self.path_of(trait)}>::{v['name']}"
            return f"{self_ty}::{v['name']}"
        if kind == "function_pointer":
            sig = v["sig"]
            out = "fn(" + ", ".join(self.ty(x[1]) for x in sig["inputs"]) + ")"
            if sig.get("output"):
                out += " -> " + self.ty(sig["output"])
            return out
        if kind == "infer":
            return "_"
        return json.dumps(t, sort_keys=True)

    def generics(self, g):
        params = []
        for p in g.get("params", []):
            k = p["kind"]
            if "lifetime" in k:
                params.append(p["name"])
            elif "type" in k:
                if k["type"].get("is_synthetic"):
                    continue
                b = self.bounds(k["type"].get("bounds", []))
                params.append(p["name"] + (": " + b if b else ""))
            elif "const" in k:
                params.append(f"const {p['name']}: {self.ty(k['const']['type'])}")
        return "<" + ", ".join(params) + ">" if params else ""

    def where(self, g):
        preds = []
        for w in g.get("where_predicates", []):
            if "bound_predicate" in w:
                bp = w["bound_predicate"]
                preds.append(f"{self.ty(bp['type'])}: {self.bounds(bp['bounds'])}")
            else:
                preds.append(json.dumps(w, sort_keys=True))
        return " where " + ", ".join(preds) if preds else ""

    def fn(self, path, item):
        f = item["inner"]["function"]
        h = f["header"]
        quals = "".join(
            q for q, on in (("const ", h["is_const"]), ("async ", h["is_async"]), ("unsafe ", h["is_unsafe"])) if on
        )
        params = []
        for name, t in f["sig"]["inputs"]:
            if name == "self":
                rendered = self.ty(t)
                params.append({"Self": "self", "&Self": "&self", "&mut Self": "&mut self"}.get(rendered, "self: " + rendered))
            else:
                params.append(f"{name}: {self.ty(t)}")
        out = f" -> {self.ty(f['sig']['output'])}" if f["sig"].get("output") else ""
        return f"pub {quals}fn {path}{self.generics(f['generics'])}({', '.join(params)}){out}{self.where(f['generics'])}"

    # ------------------------------------------------------------ items

    def add(self, line):
        self.lines.add(line)

    def impls(self, path, ids):
        for iid in ids:
            imp = self.index.get(str(iid))
            if not imp:
                continue
            i = imp["inner"]["impl"]
            if i.get("blanket_impl") is not None:
                continue
            gen = self.generics(i["generics"])
            if i.get("trait") is None:
                for mid in i["items"]:
                    m = self.index.get(str(mid))
                    if not m or m["visibility"] != "public":
                        continue
                    self.item(f"{path}::{m['name']}", m)
                continue
            if i["trait"]["path"] in UNSTABLE_AUTO_TRAITS:
                continue
            neg = "!" if i.get("is_negative") else ""
            trait = self.path_of(i["trait"]) + self.args(i["trait"].get("args"))
            self.add(f"impl{gen} {neg}{trait} for {self.ty(i['for'])}{self.where(i['generics'])}")

    def item(self, path, item):
        inner = item["inner"]
        kind = next(iter(inner))
        v = inner[kind]
        key = (path, item["id"])
        if key in self.seen:
            return
        self.seen.add(key)
        known = self.public.get(item["id"])
        if known is None or (len(path), path) < (len(known), known):
            self.public[item["id"]] = path
        if kind == "module":
            self.add(f"pub mod {path}")
            for cid in v["items"]:
                child = self.index.get(str(cid))
                if child and child["visibility"] == "public":
                    self.child(path, child)
        elif kind == "function":
            self.add(self.fn(path, item))
        elif kind == "struct":
            self.add(f"pub struct {path}{self.generics(v['generics'])}{self.where(v['generics'])}")
            k = v["kind"]
            fields = k.get("plain", {}).get("fields", []) if isinstance(k, dict) else []
            if isinstance(k, dict) and "tuple" in k:
                fields = [f for f in k["tuple"] if f is not None]
            for fid in fields:
                f = self.index.get(str(fid))
                if f and f["visibility"] == "public":
                    self.add(f"pub {path}::{f['name']}: {self.ty(f['inner']['struct_field'])}")
            self.impls(path, v["impls"])
        elif kind == "enum":
            self.add(f"pub enum {path}{self.generics(v['generics'])}{self.where(v['generics'])}")
            for vid in v["variants"]:
                var = self.index[str(vid)]
                vk = var["inner"]["variant"]["kind"]
                if vk == "plain":
                    self.add(f"pub {path}::{var['name']}")
                elif "tuple" in vk:
                    types = [self.ty(self.index[str(f)]["inner"]["struct_field"]) if f is not None else "_" for f in vk["tuple"]]
                    self.add(f"pub {path}::{var['name']}({', '.join(types)})")
                elif "struct" in vk:
                    for fid in vk["struct"]["fields"]:
                        f = self.index[str(fid)]
                        self.add(f"pub {path}::{var['name']}::{f['name']}: {self.ty(f['inner']['struct_field'])}")
                    if vk["struct"].get("has_stripped_fields"):
                        self.add(f"pub {path}::{var['name']} {{ .. }}")
            self.impls(path, v["impls"])
        elif kind == "trait":
            self.add(f"pub trait {path}{self.generics(v['generics'])}")
            for mid in v["items"]:
                m = self.index.get(str(mid))
                if m:
                    self.item(f"{path}::{m['name']}", m)
        elif kind == "constant":
            self.add(f"pub const {path}: {self.ty(v['type'])}")
        elif kind == "static":
            self.add(f"pub static {path}: {self.ty(v['type'])}")
        elif kind == "type_alias":
            self.add(f"pub type {path}{self.generics(v['generics'])} = {self.ty(v['type'])}")
        elif kind == "assoc_type":
            self.add(f"type {path}")
        elif kind == "assoc_const":
            self.add(f"const {path}: {self.ty(v['type'])}")
        elif kind in ("macro", "proc_macro"):
            self.add(f"macro {path}")
        elif kind == "union":
            self.add(f"pub union {path}")
            self.impls(path, v["impls"])
        else:
            self.add(f"{kind} {path}")

    def child(self, parent, child):
        inner = child["inner"]
        if "use" in inner:
            u = inner["use"]
            target = self.index.get(str(u["id"])) if u.get("id") is not None else None
            if u["is_glob"]:
                if target and "module" in target["inner"]:
                    for cid in target["inner"]["module"]["items"]:
                        c = self.index.get(str(cid))
                        if c and c["visibility"] == "public":
                            self.child(parent, c)
                else:
                    self.add(f"pub use {parent}::{u['source']}::*")
            elif target:
                self.item(f"{parent}::{u['name']}", target)
            else:
                # An item of another crate (e.g. zklock-jute), listed there.
                entry = self.paths.get(str(u.get("id")))
                source = "::".join(entry["path"]) if entry else u["source"]
                self.add(f"pub use {parent}::{u['name']} = {source}")
                if u.get("id") is not None:
                    self.public.setdefault(u["id"], f"{parent}::{u['name']}")
            return
        self.item(f"{parent}::{child['name']}", child)


def main():
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    api = Api(doc)
    root = api.index[api.root]
    # First pass: learn every item's public path; second: render with them.
    api.item(root["name"], root)
    api.lines.clear()
    api.seen.clear()
    api.item(root["name"], root)
    for line in sorted(api.lines):
        print(line)


if __name__ == "__main__":
    main()
