"""The procedure as data (codegen/procedure.py) and the table of entry points
(codegen/entry_points.py): every step kind has a looped rendering and an
unknown one stops the generation, every threshold has one home, the
workspaces are sized per family, and the header, the C and the kernel follow
the table."""

import re
from dataclasses import dataclass

import pytest

from codegen import entry_points, procedure
from codegen.emit import FAMILY_VARIABLES, emit_kernel, environment, template_dir


def _steps(steps):
    for step in steps:
        yield step
        if step.kind == "branch":
            yield from _steps(step.then + step.otherwise)


def _util_module():
    """The template macros of util.c.jinja with a minimal context."""
    context = dict(NAME="M", model_name="m", caller_arrays=procedure.CALLER_ARRAYS, array_owner={},
                   index_sets=procedure.INDEX_SETS, svds={}, zero_tables={}, factors={},
                   families=entry_points.FAMILIES, family_var=FAMILY_VARIABLES, stage_family={})
    return environment().get_template("util.c.jinja").make_module(context)


def test_every_step_kind_of_the_procedure_has_a_looped_rendering(disk_sources):
    kinds = {step.kind for multipliers in (True, False) for identity in (True, False)
             for stage in procedure.procedure(identity, multipliers) for step in _steps(stage.steps)}
    text = (template_dir() / "util.c.jinja").read_text()
    for kind in kinds:
        assert f'step.kind == "{kind}"' in text or f'"{kind}"' in text, kind
    # and the disk's C has a function for every looped stage
    c = disk_sources.files["disk.c"]
    for stage in procedure.procedure(False):
        if stage.steps and stage.name not in ("kinematic_rates", "dynamic_rates", "equilibrium"):
            assert f"general_{stage.name}(" in c, stage.name


def test_an_unknown_step_kind_stops_the_generation():
    @dataclass(frozen=True)
    class Bogus:
        kind = "bogus"
        what: str = ""

    with pytest.raises(ValueError, match="bogus has no looped rendering"):
        _util_module().looped(Bogus(), {})


def test_every_threshold_is_a_macro_of_the_header_with_its_default(disk_sources):
    header = disk_sources.files["disk.h"]
    for name, (default, doc) in procedure.THRESHOLDS.items():
        if name in procedure.GENERATION_THRESHOLDS:     # they choose the code: no macro
            assert f"DISK_{name}" not in header, name
            continue
        match = re.search(rf"#ifndef DISK_{name}\n#define DISK_{name} (\S+)\n#endif", header)
        assert match, name
        assert float(match.group(1).strip("()")) == default, name
    # no numeric tolerance is written into the templates: they use the macros
    for path in ("util.c.jinja", "entry_points.c.jinja", "model.c.jinja"):
        text = (template_dir() / path).read_text()
        assert not re.search(r"\b\d+(\.\d+)?e-?\d+\b", text), path


def test_the_straight_line_code_carries_each_steps_description(disk_sources):
    c = disk_sources.files["disk.c"]
    body = re.search(r"static int straight_line_solution\(.*?\n}\n", c, re.S).group(0)
    for what in ("Ahat_u = A_uq + A_uu C_1", "A'_q = M_qq^-1 A~_q", "A~_u - M_uq A'_q"):
        assert f"/* {what}" in body, what
    body = re.search(r"static int straight_line_local_chart\(.*?\n}\n", c, re.S).group(0)
    for what in ("C_0 = N_q L_q^T", "A = G A H"):
        assert f"/* {what}" in body, what
    assert "DESIGN.md" not in c and "issue" not in c


def test_workspaces_are_sized_per_family(disk_sources, disk):
    header = disk_sources.files["disk.h"]
    base = re.search(r"typedef struct disk_workspace \{(.*?)\} disk_workspace;", header, re.S).group(1)
    local = re.search(r"typedef struct disk_local_workspace \{(.*?)\} disk_local_workspace;", header,
                      re.S).group(1)
    full = re.search(r"typedef struct disk_full_workspace \{(.*?)\} disk_full_workspace;", header,
                     re.S).group(1)
    # linearize's arrays in the base one; the SVDs, the charts and Newton's not
    for name in ("J_c", "M_uu", "K_c", "A_full", "A", "carried"):
        assert re.search(rf"\b{name}\[", base), name
    for name in ("svd_c", "N_qT", "T_null", "scratch"):
        assert not re.search(rf"\b{name}\[", base) and re.search(rf"\b{name}\[", local), name
    for name in ("newton_jacobian", "projector_v"):
        assert not re.search(rf"\b{name}\[", base + local) and re.search(rf"\b{name}\[", full), name
    assert "disk_workspace base;" in local and "disk_local_workspace local;" in full
    sizes = disk.model._kernel.WORKSPACE_SIZES
    assert sizes["base"] < sizes["local"] < sizes["full"]
    assert sizes["base"] < sizes["full"] / 3   # a controller carries a fraction


def test_the_header_and_the_kernel_follow_the_table(disk_sources, disk):
    header = disk_sources.files["disk.h"]
    pyx = emit_kernel()[0]
    table = disk_sources.files["codegen-table.c"]
    kernel = disk.model._kernel
    for entry in entry_points.ENTRY_POINTS:
        prototype = f"{entry.returns}{'' if entry.returns.endswith('*') else ' '}disk_{entry.name}("
        assert prototype in header, entry.name
        assert f'c_{entry.name} "codegen_{entry.name}"(' in pyx, entry.name
        assert f" disk_{entry.name}(" in table, entry.name
        declared = kernel.ENTRY_POINTS[entry.name]
        assert [p[0] for p in declared["parameters"]] == [p.name for p in entry.parameters]
        assert declared["family"] == entry.family
        if entry.batch == "map":
            assert callable(getattr(kernel, entry.name)), entry.name
        # every parameter is documented in the header
        doc = header[:header.index(prototype)].rsplit("/*", 1)[1]
        for p in entry.parameters:
            assert re.search(rf"^ \*   {p.name}\b", doc, re.M), (entry.name, p.name)


def test_each_stage_a_generated_entry_point_runs_exists():
    names = {stage.name for stage in procedure.procedure(False)}
    for entry in entry_points.ENTRY_POINTS:
        assert set(entry.stages) <= names, entry.name
        if entry.body == "stages":
            assert all(p.source in procedure.ARRAYS for p in entry.outputs), entry.name


def test_a_stage_no_entry_point_lists_is_refused():
    stages = procedure.procedure(False)
    evaluated = ["f_c", "f_v", "J_c", "J_vq", "B_v", "M_qq", "kinematic_residual", "qd", "M_uu",
                 "speed_residual", "ud", "A_qq", "A_qu", "M_uq", "A_uq", "A_uu", "B_u"]
    entry_points.workspace_layout(stages, evaluated)   # the table covers the procedure
    orphan = procedure.Stage("orphan", None, (procedure.Zero(procedure.View("newton_v")),))
    original = entry_points.ENTRY_POINTS
    try:
        entry_points.ENTRY_POINTS = tuple(e for e in original if e.name != "equilibrium")
        with pytest.raises(ValueError, match="no entry point's stages list"):
            entry_points.workspace_layout(stages + (orphan,), evaluated)
    finally:
        entry_points.ENTRY_POINTS = original
