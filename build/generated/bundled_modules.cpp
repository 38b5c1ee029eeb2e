// Generated from lib/*.shf by cmake/embed_modules.cmake; do not edit.
#include "eval/modules.hpp"

namespace sheaf {
namespace {
struct Module { std::string_view name, text; };
const Module kModules[] = {
  {"macros", R"SHEAF_MODULE(;; -*- mode: clojure -*-
;; macros.shf — standard macros, preloaded into every program (SPEC §4.7).

(defmacro when [c & body] `(if ~c (do ~@body) nil))

(defmacro unless [c & body] `(if ~c nil (do ~@body)))

(defmacro comment [& forms] nil)

;; (defmodel name [x] (layer :k act?) ...) → each layer reads W and b from p[:k].
(defmacro defmodel [name params & layers]
  (let [x (first params)
        step (fn [layer]
               (let [k (second layer)
                     act (get layer 2)
                     affine `(with-params [~'p ~k] (+ (@ ~'_ ~'W) ~'b))]
                 (if act `(~act ~affine) affine)))]
    `(defn ~name [~x ~'p] (as-> ~x ~'_ ~@(map step layers)))))

;; (defbatch name [params] [axes] body...) → vmap over the given axes.
(defmacro defbatch [name params axes & body]
  `(defn ~name ~params ((vmap (fn ~params ~@body) ~axes) ~@params)))
)SHEAF_MODULE"},
  {"misc", R"SHEAF_MODULE(;; -*- mode: clojure -*-
;; misc.shf — small utilities (SPEC §5.17). They are also builtins; this module exists so that
;; programs written for Sheaf 2.x that say (use misc) keep working.
)SHEAF_MODULE"},
};
}  // namespace

std::optional<std::string_view> bundled_module(std::string_view name) {
  for (const Module& m : kModules)
    if (m.name == name) return m.text;
  return std::nullopt;
}

std::vector<std::string_view> bundled_module_names() {
  std::vector<std::string_view> n;
  for (const Module& m : kModules) n.push_back(m.name);
  return n;
}

}  // namespace sheaf
