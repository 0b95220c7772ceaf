// A typed field of a JSON record with a fallback when it is missing, null or of another type
// (trace events are read defensively: a reader never throws on a strange record).
#pragma once
#include <nlohmann/json.hpp>

namespace dv {

template <class T>
T json_get(const nlohmann::json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    return fallback;
  }
}

}  // namespace dv
