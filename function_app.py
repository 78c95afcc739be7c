"""Azure Functions entry point: creates the app and registers dagq's blueprints.

Which coordinator trigger is registered is decided by app settings at start-up; see
``shared.functions`` and docs/functions.md.
"""

import azure.functions as func

from shared.functions import build_blueprints

app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)
for blueprint in build_blueprints():
    app.register_functions(blueprint)
