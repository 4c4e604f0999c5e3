import os

from django.conf import settings
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")
if not settings.configured:  # this process serves: its connections get the lock/statement timeouts (F7)
    os.environ.setdefault("SCOUT_DB_SERVING", "1")

application = get_wsgi_application()
