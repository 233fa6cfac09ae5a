"""Jupyter widgets in a notebook's outputs, as JupyterLab last showed them, for the course's site.

The course's widgets are tqdm's progress bars. A bar is a widget: its output holds only the id of
its model, and the kernel sends the model's state in comm messages. ``WidgetState`` follows those
messages as a notebook runs. A bar closed at its end (``leave=False``) leaves JupyterLab's page, so
its state is dropped. ``freeze`` turns each widget output into the HTML of its last state: the site
then needs no widget JavaScript, which would come from a CDN.
"""

import html
from typing import Any

STATE_MIME = "application/vnd.jupyter.widget-state+json"
VIEW_MIME = "application/vnd.jupyter.widget-view+json"
_REFERENCE = "IPY_MODEL_"


class WidgetState:
    """The state of each open widget, by model id, from the kernel's comm messages."""

    def __init__(self) -> None:
        self.models: dict[str, dict[str, Any]] = {}

    def see(self, message: dict[str, Any]) -> None:
        """Update the state from one iopub message; messages of other kinds change nothing."""
        kind = message["msg_type"]
        content = message["content"]
        if kind == "comm_close":
            self.models.pop(content.get("comm_id"), None)
            return
        if kind not in ("comm_open", "comm_msg"):
            return
        data = content.get("data", {})
        if "state" in data:  # "update" messages carry state; custom ones do not
            self.models.setdefault(content["comm_id"], {}).update(data["state"])

    def metadata(self) -> dict[str, Any]:
        """The notebook metadata entry in the format Jupyter saves widget state in."""
        state = {}
        for model_id, model in self.models.items():
            state[model_id] = {
                "model_name": model.get("_model_name"),
                "model_module": model.get("_model_module"),
                "model_module_version": model.get("_model_module_version"),
                "state": model,
            }
        return {STATE_MIME: {"version_major": 2, "version_minor": 0, "state": state}}


def _html(model_id: str, models: dict[str, Any]) -> str | None:
    """The HTML of one widget's last state; ``None`` for a kind the course does not use."""
    entry = models.get(model_id)
    if entry is None:
        return None
    state = entry["state"]
    name = entry["model_name"]
    if name in ("HBoxModel", "VBoxModel"):
        parts = []
        for child in state.get("children", []):
            part = _html(child.removeprefix(_REFERENCE), models)
            if part is None:
                return None
            parts.append(part)
        return "".join(parts)
    if name == "HTMLModel":
        return f"<span>{state.get('value', '')}</span>"
    if name == "LabelModel":
        return f"<span>{html.escape(state.get('value', ''))}</span>"
    if name in ("FloatProgressModel", "IntProgressModel"):
        value = state.get("value", 0)
        most = state.get("max", 100)
        return f'<progress value="{value}" max="{most}"></progress>'
    return None


def freeze(notebook: dict[str, Any]) -> dict[str, Any]:
    """``notebook`` with each widget output as the HTML of the widget's last state; the output of a
    closed widget is removed, as JupyterLab removes it. The widget state leaves the metadata."""
    widgets = notebook.get("metadata", {}).pop("widgets", {})
    models = widgets.get(STATE_MIME, {}).get("state", {})
    for cell in notebook["cells"]:
        kept = []
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if VIEW_MIME not in data:
                kept.append(output)
                continue
            model_id = data[VIEW_MIME]["model_id"]
            if model_id not in models:
                continue  # closed: JupyterLab no longer shows it
            shown = _html(model_id, models)
            data.pop(VIEW_MIME)
            if shown is not None:
                data["text/html"] = f'<div class="course-widget">{shown}</div>'
            kept.append(output)
        if "outputs" in cell:
            cell["outputs"] = kept
    return notebook
