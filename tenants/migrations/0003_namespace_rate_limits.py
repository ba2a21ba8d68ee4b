from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0002_control_plane"),
    ]

    operations = [
        migrations.AddField(
            model_name="namespace",
            name="rate_limits",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
