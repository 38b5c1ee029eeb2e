// backend/backend.cpp — what the backends share beyond their interface (backend.hpp).
#include "backend/backend.hpp"

#include <cctype>

namespace sheaf {

std::string file_safe_name(const std::string& name) {
  std::string r = name.empty() ? "fn" : name;
  for (char& ch : r)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_') ch = '_';
  return r;
}

}  // namespace sheaf
