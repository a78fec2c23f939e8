#include "train/registered_choices.hpp"

#include "encodings/registry.hpp"
#include "tasks/task.hpp"

namespace poslab {

const ConfigChoices& registered_choices() {
  static const ConfigChoices choices = [] {
    ConfigChoices c;
    for (const EncodingInfo& e : registered_encodings())
      c.encodings.push_back({e.name, e.options, e.config_rule});
    for (const TaskInfo& t : registered_tasks())
      c.tasks.push_back({t.name, t.options, t.config_rule});
    return c;
  }();
  return choices;
}

}  // namespace poslab
