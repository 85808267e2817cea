"""An import-linter contract of our own: each app offers other apps a declared interface
(its `services`, `selectors` and `models`, and at most one module more that it names), and
nothing else of it crosses. Only `lint-imports` loads this module (pyproject.toml's
`contract_types`); nothing at run time imports it."""

from __future__ import annotations

from importlinter import Contract, ContractCheck, fields, output


class InterfacesContract(Contract):
    """
    Configuration options:
        - apps:       the packages whose modules may import one another only through the
                      interfaces.
        - interface:  the modules every app offers (services, selectors, models), with their
                      submodules where one is a package.
        - extra:      at most one more module per app, as "app.module" (optional).
    """

    type_name = "interfaces"

    apps = fields.ListField(subfield=fields.StringField())
    interface = fields.ListField(subfield=fields.StringField())
    extra = fields.ListField(subfield=fields.StringField(), required=False)

    def offered(self) -> set[str]:
        apps = set(self.apps)  # type: ignore[arg-type]
        extra = list(self.extra or [])  # type: ignore[arg-type]
        owners = [module.split(".")[0] for module in extra]
        if len(owners) != len(set(owners)):
            raise ValueError("an app may name at most one extra module")
        modules = {f"{app}.{name}" for app in apps for name in self.interface}  # type: ignore[union-attr]
        return modules | set(extra)

    def check(self, graph, verbose: bool) -> ContractCheck:
        apps = set(self.apps)  # type: ignore[arg-type]
        offered = self.offered()
        crossings = []
        for importer in sorted(graph.modules):
            importer_app = importer.split(".")[0]
            if importer_app not in apps:
                continue
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                imported_app = imported.split(".")[0]
                if imported_app == importer_app or imported_app not in apps:
                    continue
                # The package itself is its __init__, which offers nothing but a way in.
                if imported == imported_app or any(
                    imported == module or imported.startswith(module + ".") for module in offered
                ):
                    continue
                lines = [
                    f"l.{detail['line_number']}"
                    for detail in graph.get_import_details(importer=importer, imported=imported)
                ]
                crossings.append(
                    {"importer": importer, "imported": imported, "lines": ", ".join(lines)}
                )
        return ContractCheck(kept=not crossings, metadata={"crossings": crossings})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for crossing in check.metadata["crossings"]:
            output.print_error(
                f"{crossing['importer']} imports {crossing['imported']} ({crossing['lines']}),"
                " which its app does not offer"
            )
        output.new_line()
        output.print(
            "Offer what other apps need through the app's services, selectors or models,"
            " or the one extra module pyproject.toml names for it."
        )
